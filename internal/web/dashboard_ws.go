package web

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

const (
	// pushInterval is the least time between two state messages to one
	// dashboard: a burst of changes makes one message for the burst, and
	// the last change of a burst always gets one.
	pushInterval = 100 * time.Millisecond
	// pingInterval is how often the server pings an idle dashboard, so
	// proxies keep the connection and a vanished browser is noticed.
	pingInterval = 30 * time.Second
	// maxDashboardMessage bounds a message from the dashboard, which sends none.
	maxDashboardMessage = 1 << 10
)

// serveDashboardWS keeps one dashboard up to date: it sends the state when
// the page connects, and again after approvals or sessions change.
func (s *Server) serveDashboardWS(w http.ResponseWriter, r *http.Request) {
	s.viewers.Add(1)
	defer s.viewers.Done()
	if !sameOrigin(r) {
		s.log.Debug("web: cross-origin dashboard websocket refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		writeError(w, http.StatusForbidden, "cross_origin", "the request did not come from the dashboard's own page")
		return
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Debug("web: dashboard websocket refused", "err", err, "remote", r.RemoteAddr)
		return
	}
	c.SetReadLimit(maxDashboardMessage)
	s.log.Debug("web: dashboard joined", "remote", r.RemoteAddr)

	// As in serveWS: connCtx bounds reads and writes and outlives shutdown,
	// so the close handshake can still say why; ctx ends on shutdown and
	// when the page leaves.
	connCtx, endConn := context.WithCancel(context.WithoutCancel(r.Context()))
	defer endConn()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()

	// Watch before the first state is read, so no change falls between.
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default: // a push is due already; it will read the latest state
		}
	}
	stopApprovals := s.operator.Approvals.Watch(signal)
	defer stopApprovals()
	stopSessions := s.operator.Sessions.Changes(signal)
	defer stopSessions()

	read := make(chan error, 1)
	go func() {
		for {
			// The page sends nothing; reading handles pongs and the close.
			if _, _, err := c.Read(connCtx); err != nil {
				cancel()
				read <- err
				return
			}
		}
	}()
	var pings sync.WaitGroup
	pings.Go(func() { keepAlive(ctx, connCtx, c, cancel) })

	err = s.pushStates(ctx, connCtx, c, changed)
	cancel()
	if r.Context().Err() != nil {
		c.Close(websocket.StatusGoingAway, "server shutting down")
	} else {
		c.CloseNow() // the page left, stalled or broke the protocol
	}
	endConn()
	pings.Wait()
	rerr := <-read
	s.log.Debug("web: dashboard left", "remote", r.RemoteAddr, "err", rerr, "write_err", err)
}

// pushStates sends the state now and after every signal on changed, at
// most once per pushInterval, until ctx ends (nil) or a write fails.
func (s *Server) pushStates(ctx, connCtx context.Context, c *websocket.Conn, changed <-chan struct{}) error {
	for {
		// The state read below includes whatever was signalled so far.
		select {
		case <-changed:
		default:
		}
		st := s.state(ctx)
		st.T = "state"
		msg, err := json.Marshal(st)
		if err != nil {
			return err
		}
		wctx, wcancel := context.WithTimeout(connCtx, writeTimeout)
		err = c.Write(wctx, websocket.MessageText, msg)
		wcancel()
		if err != nil {
			return err
		}
		sent := time.Now()

		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		// Let the rest of a burst arrive; its last change is in the next
		// state, since the signal stays in changed until then.
		if wait := pushInterval - time.Since(sent); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
	}
}

// keepAlive pings the page every pingInterval until ctx ends; a ping that
// gets no pong in writeTimeout ends the connection through fail.
func keepAlive(ctx, connCtx context.Context, c *websocket.Conn, fail func()) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(connCtx, writeTimeout)
		err := c.Ping(pctx)
		pcancel()
		if err != nil {
			fail()
			return
		}
	}
}
