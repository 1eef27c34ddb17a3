package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/session"
)

// withPolicy builds a server whose every target has the given policy and
// whose asks go to broker.
func withPolicy(t *testing.T, mode string, rules []policy.RuleSpec, o approval.Options) (*fixture, *approval.Broker) {
	t.Helper()
	p, err := policy.Compile(mode, rules)
	if err != nil {
		t.Fatal(err)
	}
	b := approval.New(o)
	f := newServerWith(t, 0, func(d *mcp.Deps) {
		d.Policy = func(string, string) mcp.Policy { return mcp.Policy{Judge: p} }
		d.Approvals = b
	})
	return f, b
}

// history is the session's shell history, read past the policy (as the
// human's terminal would show it).
func (f *fixture) history(t *testing.T, c *mcptest.Client, s mcptest.Session) string {
	t.Helper()
	r := mcptest.MustOK(t, c.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))
	u := mcptest.Str(r["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(u[strings.LastIndex(u, "/")+1:])
	if !ok {
		t.Fatalf("no session behind %s", u)
	}
	rec, err := sess.Exec(context.Background(), "history", session.ExecOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return rec.Stdout.String()
}

func errCode(r map[string]any) string { s, _ := r["error"].(string); return s }

// TestPolicyModes: each mode over a real MCP client; read-only tools work
// in all of them, and a refused command never reaches the shell.
func TestPolicyModes(t *testing.T) {
	connectOK := policy.RuleSpec{Tool: "ssh_connect", Decision: "allow"}
	cases := []struct {
		name    string
		mode    string
		rules   []policy.RuleSpec
		command string
		want    string // error code, or "" for success
	}{
		{"allow runs", "allow", nil, "touch ran", ""},
		{"yes is allow", "yes", nil, "touch ran", ""},
		{"deny refuses", "deny", []policy.RuleSpec{connectOK}, "touch ran", "policy_denied"},
		{"no is deny", "no", []policy.RuleSpec{connectOK}, "touch ran", "policy_denied"},
		{"deny rule inside a compound", "allow", []policy.RuleSpec{{Command: "rm -rf *", Decision: "deny"}}, "touch ran && rm -rf /tmp/x", "policy_denied"},
		{"allow rule in deny mode", "deny", []policy.RuleSpec{connectOK, {Command: "touch *", Decision: "allow"}}, "touch ran", ""},
		{"ask waits, then pending", "ask", []policy.RuleSpec{connectOK}, "touch ran", "approval_pending"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := withPolicy(t, tc.mode, tc.rules, approval.Options{Wait: 200 * time.Millisecond})
			c := f.client(t)
			s := connect(t, c, "p")
			// Read-only tools work whatever the mode.
			mcptest.MustOK(t, c.Call(t, "ssh_list_sessions", map[string]any{}))
			r := exec(t, c, s, tc.command)
			if got := errCode(r); got != tc.want {
				t.Fatalf("%s: error %q, want %q: %v", tc.command, got, tc.want, mcptest.Short(r))
			}
			_, err := os.Stat(filepath.Join(f.workspace, "ran"))
			if ran := err == nil; ran != (tc.want == "") {
				t.Fatalf("the command ran: %v, want %v", ran, tc.want == "")
			}
			// The history shows what ran, so it can show what did not.
			h := f.history(t, c, s)
			if strings.Contains(h, "touch ran") != (tc.want == "") {
				t.Errorf("history (command ran: %v):\n%s", tc.want == "", h)
			}
			if tc.want != "" {
				if msg := mcptest.Str(r["message"]); !strings.Contains(msg, "Nothing was run") {
					t.Errorf("message does not say nothing ran: %q", msg)
				}
			}
		})
	}
}

// TestApprovalFlow: the call waits, a human answers, the call runs once
// with its approvalId; a denial carries the reason; the timeout denies.
func TestApprovalFlow(t *testing.T) {
	ask := []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}, {Command: "echo *", Decision: "ask"}}

	t.Run("approved while waiting", func(t *testing.T) {
		f, b := withPolicy(t, "allow", ask, approval.Options{Wait: 30 * time.Second})
		c := f.client(t)
		s := connect(t, c, "a")
		answer(t, b, approval.Decision{Approved: true, By: approval.ByDashboard})
		r := exec(t, c, s, "echo approved")
		if got := mcptest.Str(mcptest.Result(t, r)["stdout"]); got != "approved\n" {
			t.Fatalf("stdout %q", got)
		}
		id := mcptest.Str(r["approvalId"])
		if !strings.HasPrefix(id, "apr_") {
			t.Fatalf("no approvalId in the reply: %v", mcptest.Short(r))
		}
		// The identical call a second time asks again.
		answer(t, b, approval.Decision{Approved: false, By: approval.ByDashboard, Reason: "once is enough"})
		r = exec(t, c, s, "echo approved")
		if errCode(r) != "approval_denied" || mcptest.Str(r["reason"]) != "once is enough" || mcptest.Str(r["approvalId"]) == id {
			t.Fatalf("second identical call: %v", mcptest.Short(r))
		}
	})

	t.Run("pending, then the repeat picks up the answer", func(t *testing.T) {
		f, b := withPolicy(t, "allow", ask, approval.Options{Wait: 100 * time.Millisecond})
		c := f.client(t)
		s := connect(t, c, "a")
		r := exec(t, c, s, "echo later")
		if errCode(r) != "approval_pending" || mcptest.Str(r["expiresAt"]) == "" {
			t.Fatalf("want approval_pending with expiresAt: %v", mcptest.Short(r))
		}
		id := mcptest.Str(r["approvalId"])
		if _, err := b.Decide(context.Background(), id, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
			t.Fatal(err)
		}
		r = exec(t, c, s, "echo later")
		if got := mcptest.Str(mcptest.Result(t, r)["stdout"]); got != "later\n" || mcptest.Str(r["approvalId"]) != id {
			t.Fatalf("repeat after approval: %v", mcptest.Short(r))
		}
	})

	t.Run("the timeout denies", func(t *testing.T) {
		f, _ := withPolicy(t, "allow", ask, approval.Options{Wait: 10 * time.Second, Timeout: 300 * time.Millisecond})
		c := f.client(t)
		s := connect(t, c, "a")
		if r := exec(t, c, s, "echo never"); errCode(r) != "approval_timeout" {
			t.Fatalf("want approval_timeout: %v", mcptest.Short(r))
		}
	})
}

// TestApprovalBinding: an approval runs its one action, in its one session.
func TestApprovalBinding(t *testing.T) {
	rules := []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}}
	f, b := withPolicy(t, "ask", rules, approval.Options{Wait: 100 * time.Millisecond, MaxRemember: time.Hour})
	c := f.client(t)
	a, bs := connect(t, c, "sa"), connect(t, c, "sb")
	ctx := context.Background()

	r := exec(t, c, a, "echo X")
	if errCode(r) != "approval_pending" {
		t.Fatalf("want approval_pending: %v", mcptest.Short(r))
	}
	if _, err := b.Decide(ctx, mcptest.Str(r["approvalId"]), approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
		t.Fatal(err)
	}
	// Not another command in A, not the same command in B.
	if r := exec(t, c, a, "echo Y"); errCode(r) != "approval_pending" {
		t.Fatalf("Y in A ran on X's approval: %v", mcptest.Short(r))
	}
	if r := exec(t, c, bs, "echo X"); errCode(r) != "approval_pending" {
		t.Fatalf("X in B ran on A's approval: %v", mcptest.Short(r))
	}
	// X in A runs, once.
	if got := mcptest.Str(mcptest.Result(t, exec(t, c, a, "echo X"))["stdout"]); got != "X\n" {
		t.Fatalf("X in A: %q", got)
	}
	if r := exec(t, c, a, "echo X"); errCode(r) != "approval_pending" {
		t.Fatalf("X in A ran twice on one approval: %v", mcptest.Short(r))
	}

	// Remember: the same command again in A without asking; never in B.
	r = exec(t, c, a, "echo R")
	if _, err := b.Decide(ctx, mcptest.Str(r["approvalId"]), approval.Decision{Approved: true, By: approval.ByDashboard, Remember: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := mcptest.Str(mcptest.Result(t, exec(t, c, a, "echo R"))["stdout"]); got != "R\n" {
			t.Fatalf("remembered R, run %d: %q", i, got)
		}
	}
	if r := exec(t, c, bs, "echo R"); errCode(r) != "approval_pending" {
		t.Fatalf("R in B ran on A's remembered approval: %v", mcptest.Short(r))
	}
}

// answer decides the next approval that appears, from another goroutine,
// as a human at the dashboard would.
func answer(t *testing.T, b *approval.Broker, d approval.Decision) {
	t.Helper()
	ch := make(chan struct{}, 1)
	stop := b.Watch(func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	go func() {
		defer stop()
		deadline := time.After(20 * time.Second)
		for {
			if p := b.Pending(); len(p) > 0 {
				if _, err := b.Decide(context.Background(), p[0].ID, d); err != nil {
					t.Errorf("decide: %v", err)
				}
				return
			}
			select {
			case <-ch:
			case <-deadline:
				t.Errorf("no approval appeared in 20 s")
				return
			}
		}
	}()
}

// TestApprovalProgress: a client that sent a progress token hears, while
// its call waits for a human, that it waits and for what.
func TestApprovalProgress(t *testing.T) {
	p, err := policy.Compile("ask", []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}})
	if err != nil {
		t.Fatal(err)
	}
	b := approval.New(approval.Options{Wait: 30 * time.Second})
	f := newServerWith(t, 0, func(d *mcp.Deps) {
		d.Heartbeat = 300 * time.Millisecond
		d.Policy = func(string, string) mcp.Policy { return mcp.Policy{Judge: p} }
		d.Approvals = b
	})
	notes := make(chan string, 100)
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "p", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			notes <- r.Params.Message
		}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	s := connect(t, &mcptest.Client{CS: cs}, "w")
	// The human answers once the client has heard twice that it waits.
	go func() {
		heard := 0
		for msg := range notes {
			if strings.Contains(msg, "waiting") && strings.Contains(msg, "echo patient") {
				if heard++; heard == 2 {
					if pend := b.Pending(); len(pend) == 1 {
						_, _ = b.Decide(ctx, pend[0].ID, approval.Decision{Approved: true, By: approval.ByDashboard})
					}
					return
				}
			}
		}
	}()
	params := &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "echo patient"}}
	params.SetProgressToken("w-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &r); err != nil {
		t.Fatal(err)
	}
	if got := mcptest.Str(mcptest.Result(t, r)["stdout"]); got != "patient\n" {
		t.Fatalf("after the wait: %v", mcptest.Short(r))
	}
}

// TestForwardedApartFromLocal: a forwarded action that copies a local
// session's pending action field for field neither picks up nor uses up
// that session's approval.
func TestForwardedApartFromLocal(t *testing.T) {
	f, b := withPolicy(t, "ask", []policy.RuleSpec{{Tool: "ssh_connect", Decision: "allow"}}, approval.Options{Wait: 100 * time.Millisecond})
	c := f.client(t)
	s := connect(t, c, "own")
	r := exec(t, c, s, "echo mine")
	if errCode(r) != "approval_pending" {
		t.Fatalf("want approval_pending: %v", mcptest.Short(r))
	}
	local, _ := b.Get(mcptest.Str(r["approvalId"]))
	if _, err := b.Decide(context.Background(), local.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
		t.Fatal(err)
	}
	ans := f.srv.Forwarded(context.Background(), forward.Forwarder{}, forward.Request{Approval: local.Request, WaitSeconds: 1})
	if ans.Behavior == forward.Allow || ans.ID == local.ID {
		t.Fatalf("a forwarded copy picked up the local approval: %+v", ans)
	}
	if got := mcptest.Str(mcptest.Result(t, exec(t, c, s, "echo mine"))["stdout"]); got != "mine\n" {
		t.Fatalf("the local session's approved repeat: %q", got)
	}
}

// TestForwardedTenants: an upstream decides a forwarded action only for a
// tenant it serves, and only for the tenant of the forwarder's claim; any
// other is denied, even where its policy would allow everything.
func TestForwardedTenants(t *testing.T) {
	f, _ := withPolicy(t, "allow", nil, approval.Options{Wait: 100 * time.Millisecond})
	for _, tc := range []struct {
		name, claimTenant, actionTenant, want, msg string
	}{
		{"operator, served tenant", "", "default", forward.Allow, ""},
		{"claim of the action's tenant", "default", "default", forward.Allow, ""},
		{"claim of another tenant", "acme", "default", forward.Deny, `the forwarder's claim is for tenant "acme"`},
		{"operator, unknown tenant", "", "ghost", forward.Deny, `serves no tenant "ghost"`},
		{"claim of the unknown tenant", "ghost", "ghost", forward.Deny, `serves no tenant "ghost"`},
		{"no tenant", "", "", forward.Deny, `serves no tenant ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := forward.Request{Approval: approval.Request{ID: "apr_down", Action: approval.Action{
				Tenant: tc.actionTenant, SessionID: "s1", Tool: "ssh_exec", Command: "rm -rf /srv"}}, WaitSeconds: 1}
			ans := f.srv.Forwarded(context.Background(), forward.Forwarder{Tenant: tc.claimTenant, Name: "boss"}, r)
			if ans.Behavior != tc.want || !strings.Contains(ans.Message, tc.msg) {
				t.Fatalf("answer %+v, want %s with %q", ans, tc.want, tc.msg)
			}
		})
	}
}
