package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// askConfig asks for every command and allows connecting, on one local
// target rooted at ws.
func askConfig(ws string) string {
	return "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + askPolicy
}

const askPolicy = `policy:
  mode: ask
  rules:
    - {tool: ssh_connect, decision: allow}
    - {tool: ssh_disconnect, decision: allow}
approvals: {waitSeconds: 1, timeoutSeconds: 300}
`

// TestApprovalsAfterRestart: a restart denies the approvals a dead process
// left pending, and every request and decision is in a chain that
// verifies.
func TestApprovalsAfterRestart(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	a := startServer(t, serverOpts{home: home, config: askConfig(ws)})
	tok := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "w"}))["sessionToken"])
	e := wantError(t, sess{a, "w", tok}.exec(t, "echo waiting"), "approval_pending")
	id := str(e["approvalId"])
	if !strings.HasPrefix(id, "apr_") || str(e["expiresAt"]) == "" || !strings.Contains(str(e["message"]), "Repeat the identical call") {
		t.Fatalf("approval_pending reply: %v", e)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.waitExit(t, 10*time.Second)

	b := startServer(t, serverOpts{home: home, config: askConfig(ws)})
	mustOK(t, b.call(t, "ssh_list_sessions", map[string]any{}))
	var requested, decided, call bool
	for _, r := range auditRecords(t, b.dataDir) {
		if r.ApprovalID != id {
			continue
		}
		switch {
		case r.Event == "approval_requested" && r.Outcome == "pending" && r.Tool == "ssh_exec" && r.SessionName == "w":
			requested = true
		case r.Event == "approval_decided" && r.Outcome == "denied" && r.Reason == "server_restart":
			decided = true
		case r.Event == "tool_call" && r.Tool == "ssh_exec" && r.Outcome == "approval_pending":
			call = true
		}
	}
	if !requested || !decided || !call {
		t.Errorf("audit for %s: requested %v, decided by the restart %v, the tool_call %v", id, requested, decided, call)
	}
	if out, err := tandemCLI(t, "audit", "verify", "--data-dir", b.dataDir); err != nil || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}

// TestElicitation: over stdio the agent's client answers an ask by MCP
// elicitation (the go-sdk client, protocol 2026-07-28: an input request
// and the repeated call), and its answer binds like the dashboard's.
func TestElicitation(t *testing.T) {
	accept := func(content map[string]any) *sdk.ElicitResult {
		return &sdk.ElicitResult{Action: "accept", Content: content}
	}
	cases := []struct {
		name       string
		answer     *sdk.ElicitResult
		want       string // error code; "" = it ran
		reason     string
		remembered bool
	}{
		{"approve", accept(map[string]any{"decision": "approve"}), "", "", false},
		{"deny with a reason", accept(map[string]any{"decision": "deny", "reason": "not on a Friday"}), "approval_denied", "not on a Friday", false},
		{"decline", &sdk.ElicitResult{Action: "decline"}, "approval_denied", "declined in the agent's client", false},
		{"remember", accept(map[string]any{"decision": "remember", "rememberMinutes": 5}), "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan string, 10)
			s := startServer(t, serverOpts{config: askConfig(t.TempDir()), elicit: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked <- r.Params.Message
				return tc.answer, nil
			}})
			tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "e"}))["sessionToken"])
			se := sess{s, "e", tok}
			r := se.exec(t, "echo elicited")
			select {
			case msg := <-asked:
				if !strings.Contains(msg, "echo elicited") || !strings.Contains(msg, "apr_") {
					t.Errorf("the form does not show the action: %q", msg)
				}
			default:
				t.Fatalf("the client was not asked; reply %v", r)
			}
			if tc.want != "" {
				e := wantError(t, r, tc.want)
				if str(e["reason"]) != tc.reason || str(e["decidedBy"]) != "client" {
					t.Errorf("reason %q by %q, want %q by client", e["reason"], e["decidedBy"], tc.reason)
				}
				return
			}
			if got := result(t, r)["stdout"]; got != "elicited\n" || !strings.HasPrefix(str(r["approvalId"]), "apr_") {
				t.Fatalf("approved call: %v", r)
			}
			// The identical call again: asked again, unless remembered.
			r = se.exec(t, "echo elicited")
			if got := result(t, r)["stdout"]; got != "elicited\n" {
				t.Fatalf("second call: %v", r)
			}
			if n := len(asked); (n == 0) != tc.remembered {
				t.Errorf("second identical call asked the client %d times; remembered: %v", n, tc.remembered)
			}
		})
	}
}

// TestHTTPDoesNotAskTheClient: in HTTP mode the agent's client may be the
// agent itself, so by default only the dashboard answers.
func TestHTTPDoesNotAskTheClient(t *testing.T) {
	s := startHTTP(t, httpOpts{config: askConfig(t.TempDir())})
	c := s.clientOpts(t, s.token(t, "--tenant", "default", "--actor", "a"), http.DefaultTransport, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			t.Error("an HTTP client was asked to approve its own call")
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
		}})
	tok := str(mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "h"}))["sessionToken"])
	r := c.Call(t, "ssh_exec", map[string]any{"sessionName": "h", "sessionToken": tok, "command": "echo self"})
	if r["error"] != "approval_pending" {
		t.Fatalf("want approval_pending: %v", r)
	}
}

// TestElicitationTypeScript: a TypeScript-SDK client (protocol
// 2025-11-25) is asked by a server request while the call waits, and its
// answer decides.
func TestElicitationTypeScript(t *testing.T) {
	cases := []struct {
		name, answer, want string
	}{
		{"accept", `{"action":"accept","content":{"decision":"approve"}}`, ""},
		{"decline", `{"action":"decline"}`, "approval_denied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "tandem.yaml")
			// Long enough that only the client's answer can end the wait.
			policy := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
			if err := os.WriteFile(cfg, []byte(policy), 0o600); err != nil {
				t.Fatal(err)
			}
			c := startTSClientEnv(t, []string{"TANDEM_ELICIT=" + tc.answer}, "serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", cfg)
			tok := str(c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_connect", "args": map[string]any{"name": "e"}}).Reply["sessionToken"])
			start := time.Now()
			r := c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_exec", "args": map[string]any{"sessionName": "e", "sessionToken": tok, "command": "echo from-ts"}}).Reply
			if waited := time.Since(start); waited > 30*time.Second {
				t.Errorf("the call waited %v: the client's answer did not decide", waited)
			}
			msgs := c.mustDo(t, map[string]any{"op": "elicited"}).Messages
			if len(msgs) != 1 || !strings.Contains(msgs[0], "echo from-ts") {
				t.Fatalf("elicitations: %q", msgs)
			}
			if tc.want != "" {
				if r["error"] != tc.want || r["decidedBy"] != "client" {
					t.Fatalf("want %s by the client: %v", tc.want, r)
				}
				return
			}
			res, _ := r["result"].(map[string]any)
			if r["success"] != true || res["stdout"] != "from-ts\n" {
				t.Fatalf("approved call: %v", r)
			}
		})
	}
}

// TestDenyModeOverStdio: in deny mode over the real stdio transport the
// read-only tools work, a refused command never runs, and an allow rule
// still lets its own command through.
func TestDenyModeOverStdio(t *testing.T) {
	ws := t.TempDir()
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + `policy:
  mode: deny
  rules:
    - {tool: ssh_connect, decision: allow}
    - {command: "echo *", decision: allow}
`
	s := startServer(t, serverOpts{config: cfg})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "d"}))["sessionToken"])
	se := sess{s, "d", tok}
	if r := mustOK(t, s.call(t, "ssh_list_sessions", map[string]any{})); len(r["sessions"].([]any)) != 1 {
		t.Errorf("list: %v", r)
	}
	e := wantError(t, se.exec(t, "echo fine && touch refused"), "policy_denied")
	if !strings.Contains(str(e["message"]), "Nothing was run") || str(e["rule"]) != "mode deny" {
		t.Errorf("denied reply: %v", e)
	}
	if _, err := os.Stat(filepath.Join(ws, "refused")); err == nil {
		t.Fatal("a denied command ran")
	}
	if r := result(t, se.exec(t, "echo allowed")); r["stdout"] != "allowed\n" {
		t.Errorf("allowed by rule: %v", r)
	}
	wantError(t, s.call(t, "ssh_disconnect", map[string]any{"sessionName": "d", "sessionToken": tok}), "policy_denied")
	// The recording shows the allowed command once it is written, and
	// never the refused one.
	var cast string
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(cast, "allowed") && time.Now().Before(deadline) {
		files, _ := filepath.Glob(filepath.Join(s.dataDir, "recordings", "*.cast"))
		if len(files) == 1 {
			b, _ := os.ReadFile(files[0])
			cast = string(b)
		}
		time.Sleep(20 * time.Millisecond) // until the recording's flusher has written what the terminal showed
	}
	if !strings.Contains(cast, "allowed") || strings.Contains(cast, "refused") {
		t.Errorf("recording: allowed command present %v, refused command present %v",
			strings.Contains(cast, "allowed"), strings.Contains(cast, "refused"))
	}
}

// TestPendingThenDashboard: the call answers approval_pending; the
// operator approves on the dashboard; the agent's identical repeat runs,
// once, and a third identical call asks again.
func TestPendingThenDashboard(t *testing.T) {
	srv := startServer(t, serverOpts{config: askConfig(t.TempDir())})
	op := newOperatorClient(t, srv)
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "p"}))["sessionToken"])
	s := sess{srv, "p", tok}
	e := wantError(t, s.exec(t, "echo later"), "approval_pending")
	op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":true}`)
	r := s.exec(t, "echo later")
	if got := result(t, r)["stdout"]; got != "later\n" || r["approvalId"] != e["approvalId"] {
		t.Fatalf("repeat after the dashboard approved: %v", r)
	}
	wantError(t, s.exec(t, "echo later"), "approval_pending")
}
