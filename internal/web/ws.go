package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/coder/websocket"
)

const (
	// maxMessage bounds one message from the browser. The page splits a
	// large paste into smaller input messages.
	maxMessage = 64 << 10
	// writeTimeout disconnects a viewer that stops reading, rather than
	// letting it hold up the session's output.
	writeTimeout = 10 * time.Second
	// maxDimension bounds the columns and rows a viewer may ask for.
	maxDimension = 4096
)

// clientMessage is one text message from the page: {"t":"i","d":"…"} is
// input, {"t":"r","c":COLS,"r":ROWS} is a resize, {"t":"b","id":"…","n":"…"}
// hands the session back to the agent with a note.
type clientMessage struct {
	Type string `json:"t"`
	Data string `json:"d"`
	Cols int    `json:"c"`
	Rows int    `json:"r"`
	ID   string `json:"id"`
	Note string `json:"n"`
}

// requestMessage tells the page of the agent's request for the human, as
// a text message: {"t":"h","id":"…","m":"…"} while one is open, {"t":"h"}
// when none is.
type requestMessage struct {
	Type    string `json:"t"`
	ID      string `json:"id,omitempty"`
	Message string `json:"m,omitempty"`
}

// tellRequests sends the page the state of the agent's request for the
// human now and whenever it changes (see push).
func tellRequests(ctx, connCtx context.Context, c *websocket.Conn, desk HumanDesk) {
	push(ctx, connCtx, c, desk.WatchHumanRequest, 0, func() any {
		m := requestMessage{Type: "h"}
		if id, msg, ok := desk.HumanRequest(); ok {
			m.ID, m.Message = id, msg
		}
		return m
	})
}

// push sends the page message() as a text message now, and again after
// every signal of watch (and every every, if not 0) when it changed, until
// ctx ends; writes are bounded by connCtx (see serveWS).
func push(ctx, connCtx context.Context, c *websocket.Conn, watch func(func()) (stop func()), every time.Duration, message func() any) {
	kick := make(chan struct{}, 1)
	stop := watch(func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	defer stop()
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	var last []byte
	for {
		b, _ := json.Marshal(message())
		if !bytes.Equal(b, last) {
			wctx, cancel := context.WithTimeout(connCtx, writeTimeout)
			err := c.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return
			}
			last = b
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-tick:
		}
	}
}

// serveWS joins one viewer to a terminal: terminal output goes to the browser
// as binary messages, the browser's input and resizes go to the terminal.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	s.viewers.Add(1)
	defer s.viewers.Done()
	t, ok := s.sessions.Terminal(r.PathValue("key"))
	if !ok {
		s.serveNotFound(w, r)
		return
	}
	typing, who := s.mayType(r, r.PathValue("key"))
	if typing {
		w.Header().Set(InputHeader, InputTyping)
	} else {
		w.Header().Set(InputHeader, InputWatching)
	}
	// nil options keep the library's Origin check: the Origin's host must
	// equal the request's Host, or the upgrade fails with 403.
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Debug("web: websocket refused", "err", err, "remote", r.RemoteAddr)
		return
	}
	c.SetReadLimit(maxMessage)
	s.log.Debug("web: viewer joined", "remote", r.RemoteAddr, "viewer", who)

	// connCtx bounds reads and writes on the connection. It outlives the
	// server's shutdown because coder/websocket drops the connection outright
	// when the context of a Read or Write ends, and the close handshake must
	// still tell the browser why. ctx bounds the watch: it ends on shutdown
	// and when the viewer leaves.
	connCtx, endConn := context.WithCancel(context.WithoutCancel(r.Context()))
	defer endConn()
	connCtx = context.WithValue(connCtx, viewerKey{}, who+" "+r.RemoteAddr)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	read := make(chan error, 1)
	go func() {
		err := s.readInput(connCtx, c, t, typing)
		cancel()
		read <- err
	}()

	defer s.watch(r.PathValue("key"), who)()
	if desk, ok := t.(HumanDesk); ok {
		go tellRequests(ctx, connCtx, c, desk)
	}
	if st, ok := t.(Statuser); ok {
		key := r.PathValue("key")
		go tellStatus(ctx, connCtx, c, s.withPorts(st, key), func() []string { return s.watchers(key) })
	}
	var writeErr error
	err = t.Watch(ctx, func(p []byte) error {
		wctx, wcancel := context.WithTimeout(connCtx, writeTimeout)
		defer wcancel()
		writeErr = c.Write(wctx, websocket.MessageBinary, p)
		return writeErr
	})
	switch {
	case r.Context().Err() != nil:
		c.Close(websocket.StatusGoingAway, "server shutting down")
	case ctx.Err() != nil || writeErr != nil: // the viewer left, stalled or broke the protocol
		c.CloseNow()
	case err != nil:
		// A viewer that fell too far behind is told why; the page offers
		// to reconnect, which replays the current scrollback.
		s.log.Warn("web: watch session", "err", err)
		reason := err.Error()
		if len(reason) > 120 { // a close reason must fit in 123 bytes
			reason = reason[:120]
		}
		c.Close(websocket.StatusTryAgainLater, reason)
	default:
		c.Close(websocket.StatusNormalClosure, endedReason(connCtx, t))
	}
	endConn()
	err = <-read
	s.log.Debug("web: viewer left", "remote", r.RemoteAddr, "err", err, "write_err", writeErr)
}

type viewerKey struct{}

// ViewerFrom names the viewer whose input ctx carries, for Terminal.Input:
// "operator" for a browser signed in to the dashboard, "tandem attach"
// with the operator token, "admitted viewer" for a browser that opened a
// typing link, or "browser" where no operator is configured, each with the
// connection's address.
func ViewerFrom(ctx context.Context) string {
	v, _ := ctx.Value(viewerKey{}).(string)
	return v
}

// attachAgent is the User-Agent tandem attach sends.
const attachAgent = "tandem-attach"

// readInput relays the browser's messages to t until the connection fails.
// A message it cannot use is logged and skipped; the connection stays. A
// viewer that may not type (typing false) has its input and resizes
// dropped: it watches.
func (s *Server) readInput(ctx context.Context, c *websocket.Conn, t Terminal, typing bool) error {
	told := false
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		if typ != websocket.MessageText {
			s.log.Debug("web: ignoring binary message from browser")
			continue
		}
		if !typing {
			if !told {
				s.log.Info("web: dropping the keys of a viewer that may only watch", "viewer", ViewerFrom(ctx))
				told = true
			}
			continue
		}
		var m clientMessage
		if err := json.Unmarshal(data, &m); err != nil {
			s.log.Debug("web: ignoring malformed message", "err", err)
			continue
		}
		if err := relay(ctx, t, m); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Debug("web: relay to terminal", "type", m.Type, "err", err)
		}
	}
}

// relay applies one browser message to t. Messages it does not know, empty
// input and impossible sizes are dropped.
func relay(ctx context.Context, t Terminal, m clientMessage) error {
	switch {
	case m.Type == "i" && m.Data != "":
		return t.Input(ctx, []byte(m.Data))
	case m.Type == "r" && validSize(m.Cols, m.Rows):
		return t.Resize(ctx, m.Cols, m.Rows)
	case m.Type == "b" && m.ID != "":
		if desk, ok := t.(HumanDesk); ok {
			return desk.HandBack(ctx, m.ID, m.Note)
		}
	}
	return nil
}

func validSize(cols, rows int) bool {
	return cols > 0 && rows > 0 && cols <= maxDimension && rows <= maxDimension
}

// statusMessage is the status strip's state, as a text message:
// {"t":"s", …SessionStatus}.
type statusMessage struct {
	Type string `json:"t"`
	SessionStatus
}

// tellStatus sends the page the session's status now, and again whenever
// it changes (checked on every signal, and each statusEvery for the
// viewer count; see push).
func tellStatus(ctx, connCtx context.Context, c *websocket.Conn, st Statuser, viewers func() []string) {
	push(ctx, connCtx, c, st.WatchStatus, statusEvery, func() any {
		status := st.Status()
		status.Watchers = viewers()
		status.Viewers = len(status.Watchers)
		return statusMessage{Type: "s", SessionStatus: status}
	})
}

// statusEvery is how often the strip's state is checked without a signal.
const statusEvery = time.Second

// endedReason is the close reason of a session that ended: "session
// ended", and why when the terminal can say. The reason is filed a moment
// after the output ends (a dead shell's last output is read out first), so
// it is waited for, briefly.
func endedReason(ctx context.Context, t Terminal) string {
	const ended = "session ended"
	er, ok := t.(EndReasoner)
	if !ok {
		return ended
	}
	ctx, cancel := context.WithTimeout(ctx, endReasonWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if r := er.EndReason(); r != "" {
			if len(r) > 100 { // a close reason must fit in 123 bytes
				r = r[:100]
			}
			return ended + ": " + r
		}
		select {
		case <-ctx.Done():
			return ended
		case <-tick.C:
		}
	}
}

// endReasonWait bounds the wait for an ended session's reason.
const endReasonWait = 5 * time.Second
