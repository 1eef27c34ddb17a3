package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/web"
)

// pushed is a state message of /api/ws.
type pushed struct {
	T        string
	Pending  []approval.Approval
	Recent   []approval.Approval
	Sessions []web.SessionRow
}

func dashboardWS(base string) string { return "ws" + strings.TrimPrefix(base, "http") + "/api/ws" }

// dialDashboard opens the dashboard's WebSocket as the page does: with the
// operator cookie, from the page's origin.
func dialDashboard(t *testing.T, ctx context.Context, base string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, dashboardWS(base), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {base}, "Cookie": {"tandem_operator=" + operatorToken}},
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// readState reads the next state message.
func readState(t *testing.T, ctx context.Context, c *websocket.Conn) pushed {
	t.Helper()
	typ, p, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read state: %v", err)
	}
	var st pushed
	if err := json.Unmarshal(p, &st); typ != websocket.MessageText || err != nil || st.T != "state" {
		t.Fatalf("message %v %s (%v), want a state", typ, p, err)
	}
	if strings.Contains(string(p), testKey) {
		t.Errorf("a state message holds a monitoring key: %s", p)
	}
	return st
}

// readStateUntil reads state messages until cond holds for one, and
// returns it and how many it read.
func readStateUntil(t *testing.T, ctx context.Context, c *websocket.Conn, what string, cond func(pushed) bool) (pushed, int) {
	t.Helper()
	for n := 1; ; n++ {
		if ctx.Err() != nil {
			t.Fatalf("no state with %s", what)
		}
		if st := readState(t, ctx, c); cond(st) {
			return st, n
		}
	}
}

func TestDashboardWebSocket(t *testing.T) {
	b, dir := newBroker(), newDirectory(liveRow)
	base := startDashboard(t, testOperator(b, dir), sessions{})
	ctx := testContext(t)
	c := dialDashboard(t, ctx, base)

	st := readState(t, ctx, c)
	if len(st.Pending) != 0 || len(st.Sessions) != 1 || st.Sessions[0].Name != "deploy-box" {
		t.Fatalf("first state = %+v", st)
	}

	// A new approval is pushed within a second.
	start := time.Now()
	res := ask(t, b, testAction("rm -rf build"))
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	st, _ = readStateUntil(t, sctx, c, "the approval", func(st pushed) bool { return len(st.Pending) == 1 })
	cancel()
	if st.Pending[0].Action.Command != "rm -rf build" {
		t.Errorf("pushed %+v", st.Pending)
	}
	t.Logf("pushed %v after the request", time.Since(start))

	// Decided elsewhere: it moves to recent.
	if _, err := b.Decide(ctx, st.Pending[0].ID, approval.Decision{Approved: false, By: approval.ByClient, Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	st, _ = readStateUntil(t, ctx, c, "the decision", func(st pushed) bool { return len(st.Recent) == 1 })
	if len(st.Pending) != 0 || st.Recent[0].Status != approval.Denied || st.Recent[0].Decision.By != approval.ByClient {
		t.Errorf("after the decision: %+v", st)
	}
	<-res

	// Sessions changing are pushed too.
	dir.set(liveRow, endedRow)
	readStateUntil(t, ctx, c, "two sessions", func(st pushed) bool { return len(st.Sessions) == 2 })
}

// TestDashboardWebSocketCoalesces: a burst of changes is a few messages,
// and the last of them is always sent.
func TestDashboardWebSocketCoalesces(t *testing.T) {
	dir := newDirectory()
	base := startDashboard(t, testOperator(newBroker(), dir), sessions{})
	ctx := testContext(t)
	c := dialDashboard(t, ctx, base)
	readState(t, ctx, c)
	const burst = 200
	for i := range burst {
		dir.set(web.SessionRow{ID: "s", Name: fmt.Sprintf("row-%d", i)})
	}
	_, n := readStateUntil(t, ctx, c, "the last change", func(st pushed) bool {
		return len(st.Sessions) == 1 && st.Sessions[0].Name == fmt.Sprintf("row-%d", burst-1)
	})
	if n > 10 {
		t.Errorf("%d changes made %d messages; want them coalesced", burst, n)
	}
	t.Logf("%d changes, %d messages", burst, n)
}

func TestDashboardWebSocketRefused(t *testing.T) {
	dir := newDirectory(liveRow)
	base := startDashboard(t, testOperator(newBroker(), dir), sessions{})
	ctx := testContext(t)
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"foreign origin", http.Header{"Origin": {"http://evil.example"}, "Cookie": {"tandem_operator=" + operatorToken}}, http.StatusForbidden},
		{"null origin", http.Header{"Origin": {"null"}, "Cookie": {"tandem_operator=" + operatorToken}}, http.StatusForbidden},
		{"another port", http.Header{"Origin": {"http://127.0.0.1:1"}, "Cookie": {"tandem_operator=" + operatorToken}}, http.StatusForbidden},
		{"no origin", http.Header{"Cookie": {"tandem_operator=" + operatorToken}}, http.StatusForbidden},
		{"no cookie", http.Header{"Origin": {base}}, http.StatusUnauthorized},
		{"wrong cookie", http.Header{"Origin": {base}, "Cookie": {"tandem_operator=x"}}, http.StatusUnauthorized},
	} {
		c, resp, err := websocket.Dial(ctx, dashboardWS(base), &websocket.DialOptions{HTTPHeader: tc.header})
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: dial succeeded, want refusal", tc.name)
			continue
		}
		if resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: response %v, want %d", tc.name, resp, tc.status)
		}
	}
	dir.waitWatchers(t, 0)
}

// TestDashboardWebSocketLeaves: a dashboard that goes stops watching, and
// shutdown closes the ones still open with "going away".
func TestDashboardWebSocketLeaves(t *testing.T) {
	dir := newDirectory()
	base, stop := startDashboardStoppable(t, testOperator(newBroker(), dir), sessions{})
	ctx := testContext(t)
	gone := dialDashboard(t, ctx, base)
	readState(t, ctx, gone)
	stays := dialDashboard(t, ctx, base)
	readState(t, ctx, stays)
	dir.waitWatchers(t, 2)
	gone.Close(websocket.StatusNormalClosure, "")
	dir.waitWatchers(t, 1)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	_, _, err := stays.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Errorf("read during shutdown = %v, want close %v", err, websocket.StatusGoingAway)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return")
	}
	dir.waitWatchers(t, 0)
}
