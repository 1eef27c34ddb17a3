package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/web"
)

// operatorToken stands in for the token tandem keeps in its data directory.
const operatorToken = "op-3c9f1e0b7a5d42c8b6e1f0a9d8c7b6a5"

// fakeDirectory is a fixed, changeable list of sessions and their keys.
type fakeDirectory struct {
	mu       sync.Mutex
	rows     []web.SessionRow
	keys     map[string]string // session id -> monitoring key
	watchers map[int]func()
	next     int
	changed  chan struct{} // closed and replaced when watchers come or go
}

func newDirectory(rows ...web.SessionRow) *fakeDirectory {
	d := &fakeDirectory{keys: map[string]string{}, watchers: map[int]func(){}, changed: make(chan struct{})}
	d.rows = rows
	for _, r := range rows {
		d.keys[r.ID] = testKey
	}
	return d
}

func (d *fakeDirectory) Sessions(context.Context) ([]web.SessionRow, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.rows), nil
}

func (d *fakeDirectory) MonitorKey(_ context.Context, id string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k, ok := d.keys[id]
	return k, ok
}

func (d *fakeDirectory) Changes(fn func()) func() {
	d.mu.Lock()
	defer d.mu.Unlock()
	id := d.next
	d.next++
	d.watchers[id] = fn
	d.tell()
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.watchers, id)
		d.tell()
	}
}

// tell wakes waitWatchers; d.mu is held.
func (d *fakeDirectory) tell() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// set replaces the sessions and signals the change, as the session layer
// does when a session starts, ends or runs a command.
func (d *fakeDirectory) set(rows ...web.SessionRow) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rows = rows
	for _, fn := range d.watchers {
		fn()
	}
}

// waitWatchers waits until n dashboards watch the sessions.
func (d *fakeDirectory) waitWatchers(t *testing.T, n int) {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		got, changed := len(d.watchers), d.changed
		d.mu.Unlock()
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d dashboards watch the sessions, want %d", got, n)
		}
	}
}

// fakeAudit returns fixed records and remembers what it was asked.
type fakeAudit struct {
	mu      sync.Mutex
	records []web.AuditEntry
	queries []web.AuditQuery
}

func (a *fakeAudit) Search(_ context.Context, q web.AuditQuery) ([]web.AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.queries = append(a.queries, q)
	return slices.Clone(a.records), nil
}

func (a *fakeAudit) lastQuery() web.AuditQuery {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queries) == 0 {
		return web.AuditQuery{}
	}
	return a.queries[len(a.queries)-1]
}

// newBroker returns a real approval broker, without a journal.
func newBroker() *approval.Broker {
	return approval.New(approval.Options{Timeout: 2 * time.Minute})
}

// testOperator returns an Operator over b and d, without an audit log.
func testOperator(b *approval.Broker, d *fakeDirectory) *web.Operator {
	return &web.Operator{Token: operatorToken, Approvals: b, Sessions: d}
}

// startDashboard serves the operator dashboard (and the monitoring pages of
// s) on a fresh loopback port until the test ends; it returns the base URL.
func startDashboard(t *testing.T, op *web.Operator, s web.Sessions) string {
	t.Helper()
	base, stop := startDashboardStoppable(t, op, s)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return base
}

func startDashboardStoppable(t *testing.T, op *web.Operator, s web.Sessions) (string, func() error) {
	t.Helper()
	log := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := web.Listen(ctx, "", &web.ListenOptions{Logger: log})
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	srv := web.New(s, &web.Options{Logger: log, Operator: op})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel()
		return <-served
	}
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// request is one HTTP request to the dashboard: signed in with the operator
// cookie unless cookie is set otherwise, from the page's own origin.
type request struct {
	method, path, body string
	cookie             string            // "" means the right token; "-" means none
	header             map[string]string // extra headers; "" values delete
}

// do sends rq to base and returns the status, the raw body and, if JSON,
// the decoded body.
func (rq request) do(t *testing.T, base string) (int, string, map[string]any) {
	t.Helper()
	method := rq.method
	if method == "" {
		method = http.MethodGet
	}
	var payload io.Reader
	if rq.body != "" {
		payload = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(method, base+rq.path, payload)
	if err != nil {
		t.Fatal(err)
	}
	switch rq.cookie {
	case "":
		req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
	case "-":
	default:
		req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: rq.cookie})
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", base)
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range rq.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rq.path, err)
	}
	defer resp.Body.Close()
	raw := body(t, resp)
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("%s %s: JSON %q: %v", method, rq.path, raw, err)
		}
	}
	return resp.StatusCode, raw, m
}

// waitPending waits until b has n pending approvals and returns them.
func waitPending(t *testing.T, b *approval.Broker, n int) []approval.Approval {
	t.Helper()
	changed := make(chan struct{}, 1)
	stop := b.Watch(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	defer stop()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		if p := b.Pending(); len(p) == n {
			return p
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d approvals pending, want %d", len(b.Pending()), n)
		}
	}
}

// outcome is what a Request call returned, and when.
type outcome struct {
	approval.Outcome
	err error
	at  time.Time
}

// ask calls b.Request for a in the background, as a tool call that needs
// approval does, and returns where its outcome arrives.
func ask(t *testing.T, b *approval.Broker, a approval.Action) <-chan outcome {
	t.Helper()
	out := make(chan outcome, 1)
	ctx := t.Context()
	go func() {
		o, err := b.Request(ctx, a, "rules[2]", "commands that delete need a person", 30*time.Second, nil)
		out <- outcome{o, err, time.Now()}
	}()
	return out
}

// testAction is an action that needs approval; vary Command for another.
func testAction(command string) approval.Action {
	return approval.Action{Tenant: "acme", Actor: "build-bot", SessionID: "s1", SessionName: "deploy-box",
		Target: "ops@prod-1", Tool: "ssh_exec", Command: command, Cwd: "/srv/app"}
}

// liveRow and endedRow are sessions as the directory lists them.
var (
	liveRow = web.SessionRow{ID: "s1", Name: "deploy-box", Tenant: "acme", Actor: "build-bot", Target: "ops@prod-1",
		Kind: "ssh", Status: "running", LastCommand: "make deploy", CreatedAt: time.Now().Add(-time.Hour), LastActivity: time.Now()}
	endedRow = web.SessionRow{ID: "s0", Name: "old-box", Tenant: "acme", Actor: "build-bot", Target: "local",
		Kind: "local", Status: "ended", LastCommand: "exit", CreatedAt: time.Now().Add(-2 * time.Hour),
		EndedAt: time.Now().Add(-time.Hour), Ended: true}
)
