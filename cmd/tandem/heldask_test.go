package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// askedForms collects the approval forms a client was shown.
type askedForms struct {
	mu   sync.Mutex
	msgs []string
}

func (a *askedForms) add(m string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.msgs = append(a.msgs, m)
}

func (a *askedForms) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.msgs...)
}

// heldDownload is a loopback server under the name ask.test, which a
// target's allowlist does not list, with ask as the target's network.ask.
func heldDownload(t *testing.T, ask, extra string) (ws, cfg, target string) {
	t.Helper()
	dl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "worth the wait") }))
	t.Cleanup(dl.Close)
	port := portOf(t, dl.Listener.Addr())
	ws = t.TempDir()
	cfg = egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["127.0.0.1:%d"], ask: %s, hosts: {ask.test: 127.0.0.1}}`, port, ask),
	}, extra)
	return ws, cfg, fmt.Sprintf("ask.test:%d", port)
}

// curlHeld downloads from target inside the session.
func curlHeld(target string) string {
	return "curl -sS -f --max-time 60 http://" + target + "/"
}

// TestHeldAskTheClient: a connection that waits for a human inside the
// agent's command goes to the agent's client (the go-sdk client, protocol
// 2026-07-28) as the approval form in the held call's answer; the client
// repeats the call with its human's answer, and the same call returns the
// command's result. A dismissed form leaves the approval to the dashboard.
func TestHeldAskTheClient(t *testing.T) {
	cases := []struct {
		name   string
		answer *sdk.ElicitResult
		check  func(t *testing.T, s sess, op operatorClient, r map[string]any, target string)
	}{
		{"approve", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}},
			func(t *testing.T, s sess, _ operatorClient, r map[string]any, _ string) {
				if res := result(t, r); res["stdout"] != "worth the wait" || res["exitCode"] != 0.0 {
					t.Fatalf("the approved download: %v", r)
				}
			}},
		{"deny", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "reason": "not that host"}},
			func(t *testing.T, s sess, _ operatorClient, r map[string]any, target string) {
				res := result(t, r)
				refused := refusedTargets(res)
				if res["exitCode"] == 0.0 || len(refused) != 1 || refused[0] != target {
					t.Fatalf("the denied download: %v", r)
				}
			}},
		{"dismissed", &sdk.ElicitResult{Action: "cancel"},
			func(t *testing.T, s sess, op operatorClient, r map[string]any, target string) {
				// The human closed the form: the call answers approval_pending,
				// and the dashboard still decides.
				e := wantError(t, r, "approval_pending")
				if e["connection"] != target {
					t.Fatalf("the dismissed form's reply: %v", e)
				}
				op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":true}`)
				waitCommand(t, s, str(e["commandId"]))
				got := mustOK(t, s.srv.call(t, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "commandId": e["commandId"]}))
				if got["data"] != "worth the wait" || got["exitCode"] != 0.0 {
					t.Fatalf("approved on the dashboard after the form was dismissed: %v", got)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// waitSeconds is long: the form must come at once, not after it.
			ws, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 120, timeoutSeconds: 300}\n")
			forms := &askedForms{}
			srv := startServer(t, serverOpts{dir: ws, config: cfg, elicit: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				forms.add(r.Params.Message)
				return tc.answer, nil
			}})
			s := connectTo(t, srv, "dev", "held")
			start := time.Now()
			r := s.exec(t, curlHeld(target), 100)
			if waited := time.Since(start); waited > 60*time.Second {
				t.Errorf("the call took %v: the form waited for waitSeconds", waited)
			}
			msgs := forms.all()
			if len(msgs) != 1 || !strings.Contains(msgs[0], "wants to connect to "+target) || !strings.Contains(msgs[0], `session "held"`) {
				t.Fatalf("the client's forms: %q (reply %v)", msgs, r)
			}
			tc.check(t, s, newOperatorClient(t, srv), r, target)
			var outcomes []string
			for _, rec := range auditRecords(t, srv.dataDir) {
				if rec.Event == "network" {
					outcomes = append(outcomes, rec.Outcome)
				}
			}
			want := map[string]string{"approve": "approved", "deny": "denied", "dismissed": "approved"}[tc.name]
			if strings.Join(outcomes, " ") != want {
				t.Errorf("audited network decisions %v, want %s", outcomes, want)
			}
		})
	}
}

// TestHeldAskRemembered: "remember" lets the host through again for the
// session without asking, and a second session is asked anew.
func TestHeldAskRemembered(t *testing.T) {
	ws, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 1, timeoutSeconds: 300}\n")
	forms := &askedForms{}
	srv := startServer(t, serverOpts{dir: ws, config: cfg, elicit: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		forms.add(r.Params.Message)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "remember", "rememberMinutes": 5.0}}, nil
	}})
	s := connectTo(t, srv, "dev", "first")
	for i := range 2 {
		if res := result(t, s.exec(t, curlHeld(target), 60)); res["stdout"] != "worth the wait" {
			t.Fatalf("download %d: %v", i, res)
		}
	}
	if n := len(forms.all()); n != 1 {
		t.Fatalf("asked %d times for a remembered host, want 1", n)
	}
	other := connectTo(t, srv, "dev", "second")
	if res := result(t, other.exec(t, curlHeld(target), 60)); res["stdout"] != "worth the wait" {
		t.Fatalf("the second session's download: %v", res)
	}
	if n := len(forms.all()); n != 2 {
		t.Fatalf("a second session was asked %d times in all, want 2: remembering is per session", n)
	}
}

// TestHeldAskTypeScript: a TypeScript-SDK client (protocol 2025-11-25)
// is asked about a held connection by a server request while its call
// waits, and its answer decides: the call returns the download.
func TestHeldAskTypeScript(t *testing.T) {
	_, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 60, timeoutSeconds: 300}\n")
	p := filepath.Join(t.TempDir(), "tandem.yaml")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startTSClientEnv(t, []string{`TANDEM_ELICIT={"action":"accept","content":{"decision":"approve"}}`},
		"serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", p)
	tok := str(c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_connect", "args": map[string]any{"name": "ts", "target": "dev"}}).Reply["sessionToken"])
	start := time.Now()
	r := c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_exec", "args": map[string]any{"sessionName": "ts", "sessionToken": tok, "command": curlHeld(target)}}).Reply
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("the call waited %v: the client's answer did not decide", waited)
	}
	res, _ := r["result"].(map[string]any)
	if r["success"] != true || res["stdout"] != "worth the wait" {
		t.Fatalf("the approved download: %v", r)
	}
	msgs := c.mustDo(t, map[string]any{"op": "elicited"}).Messages
	if len(msgs) != 1 || !strings.Contains(msgs[0], "wants to connect to "+target) {
		t.Fatalf("elicitations: %q", msgs)
	}
}

// TestHeldAskClientNotTrusted: where the policy's approvers leave the
// client out, it is never shown the form, and an answer it sends anyway
// (a forged requestState with "approve") decides nothing: the connection
// still waits, and the repeat runs no command.
func TestHeldAskClientNotTrusted(t *testing.T) {
	ws, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 1, timeoutSeconds: 300}\npolicy: {mode: allow, approvers: [dashboard]}\n")
	srv := startServer(t, serverOpts{dir: ws, config: cfg, elicit: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		t.Error("the client was asked, and the policy's approvers leave it out")
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}})
	s := connectTo(t, srv, "dev", "held")
	e := wantError(t, s.exec(t, curlHeld(target)+" > got; echo ran >> runs", 60), "approval_pending")
	id, cmd := str(e["approvalId"]), str(e["commandId"])
	forge := func(args map[string]any, state string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := srv.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: args, RequestState: state,
			InputResponses: sdk.InputResponseMap{"tandem.approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return mcptest.Check(t, "ssh_exec", res)
	}
	args := map[string]any{"sessionName": "held", "sessionToken": s.tok, "command": curlHeld(target) + " > got; echo ran >> runs", "timeoutSeconds": 2}
	r := forge(args, "tandem.held/"+id+"/"+cmd)
	if wantError(t, r, "approval_pending")["approvalId"] != id {
		t.Fatalf("the forged answer: %v", r)
	}
	// A second session cannot answer for the first's approval either.
	other := connectTo(t, srv, "dev", "other")
	args["sessionName"], args["sessionToken"] = "other", other.tok
	wantError(t, forge(args, "tandem.held/"+id+"/"+cmd), "unknown_command")
	op := newOperatorClient(t, srv)
	if got := op.pendingID(t, "connect "+target); got != id {
		t.Fatalf("pending approval %s, want %s still pending", got, id)
	}
	op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", `{"approve":false}`)
	waitCommand(t, s, cmd)
	if b, _ := os.ReadFile(filepath.Join(ws, "runs")); string(b) != "ran\n" {
		t.Errorf("the command ran %q times; the repeats must run nothing", b)
	}

	// A human's command is not the agent's to wait for, and a forged
	// repeat never uses up the human's news.
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "held", "sessionToken": s.tok}))["monitoringUrl"])
	optok := dataDirToken(t, srv.dataDir)
	typeOverWebSocket(t, mon, optok, "echo human-$((1+1))\r", "human-2\r\n")
	var gate map[string]any
	waitFor(20*time.Second, func() bool {
		gate = s.exec(t, "true")
		return gate["error"] != "session_busy"
	})
	cmds, _ := wantError(t, gate, "user_activity_detected")["userCommands"].([]any)
	if len(cmds) != 1 {
		t.Fatalf("userCommands: %v", gate)
	}
	human := str(cmds[0].(map[string]any)["commandId"])
	typeOverWebSocket(t, mon, optok, "echo again-$((2+2))\r", "again-4\r\n")
	args["sessionName"], args["sessionToken"] = "held", s.tok
	for _, cmdID := range []string{human, "cmd_nope"} {
		wantError(t, forge(args, "tandem.held/"+id+"/"+cmdID), "unknown_command")
	}
	waitFor(20*time.Second, func() bool {
		gate = s.exec(t, "true")
		return gate["error"] != "session_busy"
	})
	if cmds, _ := wantError(t, gate, "user_activity_detected")["userCommands"].([]any); len(cmds) != 1 || !strings.Contains(str(cmds[0].(map[string]any)["command"]), "again") {
		t.Fatalf("after forged repeats, the gate: %v", gate)
	}
}

// TestHeldProgramAsksTheClient: a program that an ask rule holds inside
// the agent's command goes to the agent's client too; approved there, the
// push runs and the call returns its result.
func TestHeldProgramAsksTheClient(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	cfg := gitPushPolicy(ws, "ask", "", "approvals: {waitSeconds: 120, timeoutSeconds: 300}\n")
	forms := &askedForms{}
	srv := startServer(t, serverOpts{config: cfg, elicit: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		forms.add(r.Params.Message)
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "g"}))["sessionToken"])
	r := sess{srv, "g", tok}.exec(t, "cd "+repo+" && ./push.sh && echo pushed", 60)
	if res := result(t, r); res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "pushed") {
		t.Fatalf("the approved push: %v", r)
	}
	msgs := forms.all()
	if len(msgs) != 1 || !strings.Contains(msgs[0], "git push -q origin main") || !strings.Contains(msgs[0], "in "+repo) {
		t.Fatalf("the client's forms: %q", msgs)
	}
	out, err := exec.Command("git", "-C", filepath.Join(ws, "remote.git"), "rev-parse", "-q", "--verify", "main").Output()
	if err != nil || len(strings.TrimSpace(string(out))) != 40 {
		t.Fatalf("the push did not reach the remote: %v %s", err, out)
	}
	// The audit keeps the program, its cwd, the line that started it, and
	// who decided.
	var requested, decided string
	for _, rec := range auditRecords(t, srv.dataDir) {
		switch rec.Event {
		case "approval_requested":
			requested = string(rec.Args)
		case "approval_decided":
			decided = string(rec.Args) + " " + rec.Outcome
		}
	}
	for _, want := range []string{`"command":"git push -q origin main"`, `"cwd":"` + repo + `"`, `"parent":"cd ` + repo + ` && ./push.sh && echo pushed"`} {
		if !strings.Contains(requested, want) {
			t.Errorf("the audited request %s lacks %s", requested, want)
		}
	}
	if !strings.Contains(decided, `"by":"client"`) || !strings.HasSuffix(decided, "approved") {
		t.Errorf("the audited decision: %s", decided)
	}
}

// TestHeldAskForward: with network.ask: forward, a connection to an
// unlisted host goes to the policy's upstream approver (a second tandem,
// whose dashboard decides); the download completes when the upstream
// approves and fails when it denies. An upstream that is down refuses the
// connection at once, saying so.
func TestHeldAskForward(t *testing.T) {
	parentCfg := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
	parent := startServer(t, serverOpts{config: parentCfg})
	op := newOperatorClient(t, parent)
	tokenFile := filepath.Join(parent.dataDir, "dashboard.token")
	child := func(url string) (sess, string) {
		_, cfg, target := heldDownload(t, "forward", `allowAdHoc: false
policy:
  mode: allow
  forward: {url: "`+url+`", tokenFile: "`+tokenFile+`"}
approvals: {waitSeconds: 60, timeoutSeconds: 300}
`)
		srv := startServer(t, serverOpts{config: cfg})
		return connectTo(t, srv, "dev", "kid"), target
	}
	kid, target := child(op.base + "/api/approvals")
	for _, approve := range []bool{true, false} {
		replies := make(chan map[string]any, 1)
		go func() { replies <- kid.exec(t, curlHeld(target), 90) }()
		id := op.pendingID(t, "connect "+target)
		op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", fmt.Sprintf(`{"approve":%v,"reason":"parent says so"}`, approve))
		var r map[string]any
		select {
		case r = <-replies:
		case <-time.After(60 * time.Second):
			t.Fatalf("approve %v: the child's download did not end after the parent decided", approve)
		}
		res := result(t, r)
		if approve && res["stdout"] != "worth the wait" {
			t.Fatalf("approved upstream: %v", r)
		}
		if refused, _ := res["networkRefused"].([]any); !approve && (res["exitCode"] == 0.0 || len(refused) != 1) {
			t.Fatalf("denied upstream: %v", r)
		}
	}
	var outcomes []string
	for _, rec := range auditRecords(t, kid.srv.dataDir) {
		if rec.Event == "network" {
			outcomes = append(outcomes, rec.Outcome+": "+rec.Reason)
		}
	}
	if len(outcomes) != 2 || !strings.HasPrefix(outcomes[0], "approved") || !strings.Contains(outcomes[1], "denied: parent says so (decided by upstream)") {
		t.Errorf("the child's audited decisions: %q", outcomes)
	}

	down, target := child("http://127.0.0.1:1/api/approvals")
	res := result(t, down.exec(t, curlHeld(target)+" 2>&1", 60))
	if refused, _ := res["networkRefused"].([]any); res["exitCode"] == 0.0 || len(refused) != 1 {
		t.Fatalf("with the upstream down: %v", res)
	}
	var reasons []string
	for _, rec := range auditRecords(t, down.srv.dataDir) {
		if rec.Event == "network" {
			reasons = append(reasons, rec.Reason)
		}
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], "could not be reached") {
		t.Errorf("the audited refusal with the upstream down: %q", reasons)
	}
}

// TestHeldAskOverHTTP: over stateless Streamable HTTP, where tandem cannot
// send the client a request of its own, a 2026-07-28 client whose policy
// names it an approver still answers a held connection: the form travels
// in the call's reply. Without "client" in the approvers it is not asked.
func TestHeldAskOverHTTP(t *testing.T) {
	for _, approvers := range []string{"[dashboard, client]", "[dashboard]"} {
		t.Run(approvers, func(t *testing.T) {
			trusted := strings.Contains(approvers, "client")
			_, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 2, timeoutSeconds: 300}\npolicy: {mode: allow, approvers: "+approvers+"}\n")
			s := startHTTP(t, httpOpts{config: cfg})
			forms := &askedForms{}
			c := s.clientOpts(t, s.token(t, "--tenant", "default", "--actor", "a"), http.DefaultTransport, &sdk.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
					forms.add(r.Params.Message)
					return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
				}})
			tok := str(mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "h", "target": "dev"}))["sessionToken"])
			r := c.Call(t, "ssh_exec", map[string]any{"sessionName": "h", "sessionToken": tok, "command": curlHeld(target), "timeoutSeconds": 60})
			if !trusted {
				if e := wantError(t, r, "approval_pending"); e["connection"] != target || len(forms.all()) != 0 {
					t.Fatalf("an untrusted client over HTTP: forms %q, reply %v", forms.all(), e)
				}
				return
			}
			if res := result(t, r); res["stdout"] != "worth the wait" {
				t.Fatalf("approved by the client over HTTP: %v", r)
			}
			if msgs := forms.all(); len(msgs) != 1 || !strings.Contains(msgs[0], "connect to "+target) {
				t.Fatalf("the forms: %q", msgs)
			}
		})
	}
}

// TestHeldProgramForward: a forward rule that holds a program a script
// starts sends it to the policy's upstream (a second tandem, whose
// dashboard approves); the push then runs, and the agent's call returns
// its result.
func TestHeldProgramForward(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	parentCfg := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
	parent := startServer(t, serverOpts{config: parentCfg})
	op := newOperatorClient(t, parent)
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	cfg := "allowAdHoc: false\n" + gitPushPolicy(ws, "forward",
		`  forward: {url: "`+op.base+`/api/approvals", tokenFile: "`+filepath.Join(parent.dataDir, "dashboard.token")+`"}`+"\n",
		"approvals: {waitSeconds: 60, timeoutSeconds: 300}\n")
	child := startServer(t, serverOpts{config: cfg})
	kid := sess{child, "kid", str(mustOK(t, child.call(t, "ssh_connect", map[string]any{"name": "kid"}))["sessionToken"])}
	replies := make(chan map[string]any, 1)
	go func() { replies <- kid.exec(t, "cd "+repo+" && ./push.sh && echo pushed", 90) }()
	id := op.pendingID(t, "git push -q origin main")
	op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", `{"approve":true}`)
	select {
	case r := <-replies:
		if res := result(t, r); res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "pushed") {
			t.Fatalf("approved upstream: %v", r)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the push did not go on after the upstream approved it")
	}
}

// TestHeldAskRetryJoins: a program that gives up waiting for a connection
// (its own timeout), over CONNECT or plain HTTP, stops waiting in the
// proxy too, but leaves the approval pending; its retry waits on the same
// approval, so the human's one answer lets the retry through.
func TestHeldAskRetryJoins(t *testing.T) {
	for _, tc := range []struct{ name, flag string }{{"CONNECT", "-p "}, {"plain HTTP", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			ws, cfg, target := heldDownload(t, "true", "approvals: {waitSeconds: 3, timeoutSeconds: 300}\n")
			srv := startServer(t, serverOpts{dir: ws, config: cfg})
			op := newOperatorClient(t, srv)
			s := connectTo(t, srv, "dev", "retry")
			// More tries that give up than may wait at once (4): a try that
			// left does not keep its place.
			for range 5 {
				r := s.exec(t, "curl -sS "+tc.flag+"--max-time 1 http://"+target+"/ 2>&1", 60)
				if r["error"] == "approval_pending" {
					waitCommand(t, s, str(r["commandId"]))
					continue
				}
				if res := result(t, r); res["exitCode"] == 0.0 || strings.Contains(str(res["stdout"]), "already wait") {
					t.Fatalf("a try that should time out waiting: %v", res)
				}
			}
			id := op.pendingID(t, "connect "+target)
			e := wantError(t, s.exec(t, curlHeld(target), 60), "approval_pending")
			if e["approvalId"] != id {
				t.Fatalf("the retry waits on %v, want the first try's %s", e["approvalId"], id)
			}
			op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", `{"approve":true}`)
			waitCommand(t, s, str(e["commandId"]))
			got := mustOK(t, srv.call(t, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "commandId": e["commandId"]}))
			if got["data"] != "worth the wait" {
				t.Fatalf("the retry after the approval: %v", got)
			}
		})
	}
}
