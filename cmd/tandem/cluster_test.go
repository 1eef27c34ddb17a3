package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/claim"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// clusterFiles writes what the nodes of one cluster share: the cluster
// secret and tandem's signing key, each 0600.
func clusterFiles(t testing.TB) (secretFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	secretFile = filepath.Join(dir, "cluster.secret")
	if err := os.WriteFile(secretFile, []byte(hex.EncodeToString(raw)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := claim.LoadOrCreateKey(dir); err != nil {
		t.Fatal(err)
	}
	return secretFile, filepath.Join(dir, "claim.key")
}

// startNodes starts n HTTP nodes sharing the store pg, one config (with
// the cluster block added to body) and each its own data dir. It returns
// them with the operator token they share.
func startNodes(t testing.TB, n int, pg, body string) ([]*httpServer, string) {
	t.Helper()
	secret, key := clusterFiles(t)
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	opToken := hex.EncodeToString(raw)
	opFile := filepath.Join(t.TempDir(), "operator.token")
	if err := os.WriteFile(opFile, []byte(opToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := body + "cluster: {secretFile: " + secret + "}\nauth: {signingKey: " + key + "}\nweb: {operatorTokenFile: " + opFile + "}\n"
	nodes := make([]*httpServer, n)
	for i := range nodes {
		nodes[i] = startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg}})
	}
	return nodes, opToken
}

// clientAt connects the go-sdk client to the MCP endpoint at url.
func clientAt(t testing.TB, url, token string) *mcptest.Client {
	t.Helper()
	s := &httpServer{url: url}
	return s.clientWith(t, token, http.DefaultTransport)
}

// TestClusterRouting: a session lives on the node that created it, and
// every other node serves it: tool calls, output read-back, the
// monitoring page and its WebSocket, and the dashboard's sessions and
// approvals. The owner checks the claim again, and a forged or
// unsigned internal request is refused.
func TestClusterRouting(t *testing.T) {
	ws := t.TempDir()
	pg := testenv.Postgres(t)
	nodes, opToken := startNodes(t, 2, pg, "targets: [{name: local, kind: local, workspace: "+ws+"}]\n"+`policy:
  mode: allow
  rules:
    - {tool: ssh_exec, command: "echo approve-me *", decision: ask}
approvals: {waitSeconds: 60}
limits: {inlineOutputBytes: 4096}
`)
	a, b := nodes[0], nodes[1]
	tok := a.token(t, "--tenant", "default", "--actor", "alice")
	viaA, viaB := a.client(t, tok), b.client(t, tok)
	tokS := str(mustOK(t, viaA.Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	sess := func(extra map[string]any) map[string]any {
		m := map[string]any{"sessionName": "dev", "sessionToken": tokS}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	// Calls through B run in A's shell: state persists across nodes.
	mustOK(t, viaB.Call(t, "ssh_exec", sess(map[string]any{"command": "cd /tmp && export WHERE=shared"})))
	r := result(t, viaA.Call(t, "ssh_exec", sess(map[string]any{"command": "printenv WHERE; pwd"})))
	if r["stdout"] != "shared\n/tmp\n" {
		t.Fatalf("A after B: %v", r)
	}
	bigReply := mustOK(t, viaB.Call(t, "ssh_exec", sess(map[string]any{"command": "seq 1 20000"})))
	big := result(t, bigReply)
	id := str(bigReply["commandId"])
	if id == "" {
		id = str(big["commandId"])
	}
	if id == "" || big["stdoutTruncated"] != true {
		t.Fatalf("big output through B: %.500v", bigReply)
	}
	rb := mustOK(t, viaB.Call(t, "ssh_read_output", sess(map[string]any{"commandId": id, "offset": -6})))
	if rb["data"] != "20000\n" {
		t.Fatalf("read back through B: %v", rb)
	}
	// The output resource, read through B, is A's.
	uri := str(big["stdoutResource"].(map[string]any)["uri"])
	rr, err := viaB.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil || len(rr.Contents) != 1 || !strings.HasSuffix(rr.Contents[0].Text, "19999\n20000\n") {
		t.Fatalf("resource %s through B: %v %v", uri, rr, err)
	}
	// B lists A's session among the caller's own; another caller does not see it.
	list := mustOK(t, viaB.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["name"] != "dev" || list[0].(map[string]any)["status"] != "active" {
		t.Fatalf("ssh_list_sessions through B: %v", list)
	}
	// The wrong token is refused by the owner, as on one node.
	wantError(t, viaB.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": "wrong", "command": "true"}), "invalid_session_token")
	// Another caller (another sid) never reaches the session through B.
	other := b.client(t, b.token(t, "--tenant", "default", "--actor", "mallory"))
	wantError(t, other.Call(t, "ssh_exec", sess(map[string]any{"command": "true"})), "invalid_session_token")
	if l := mustOK(t, other.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"].([]any); len(l) != 0 {
		t.Fatalf("another caller lists %v", l)
	}

	// The monitoring URL names A; opened through B it is A's page, and
	// typing into its WebSocket through B trips the gate for the agent.
	mon := str(mustOK(t, viaB.Call(t, "ssh_get_monitoring_url", sess(nil)))["monitoringUrl"])
	if !strings.HasPrefix(mon, a.base+"/s/") {
		t.Fatalf("monitoring URL %s does not name the owner %s", mon, a.base)
	}
	throughB := b.base + strings.TrimPrefix(mon, a.base)
	resp, err := http.Get(throughB)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "dev") {
		t.Fatalf("monitoring page through B: %s %.300s", resp.Status, page)
	}
	typeOverWebSocket(t, throughB, opToken, "echo typed-via-b\r", "\rtyped-via-b\r\n")
	if !waitFor(10*time.Second, func() bool {
		return viaB.Call(t, "ssh_exec", sess(map[string]any{"command": "true"}))["error"] == "user_activity_detected"
	}) {
		t.Fatal("typing through B's forwarded WebSocket never tripped the gate")
	}

	// B's dashboard lists A's session and opens it through A.
	// One sign-in serves every node: they share the operator token.
	opB := operatorClient{base: b.base, token: opToken}
	operatorClient{base: a.base, token: opToken}.do(t, http.MethodGet, "/api/state", "")
	st := opB.do(t, http.MethodGet, "/api/state", "")
	found := ""
	for _, s := range st["sessions"].([]any) {
		m := s.(map[string]any)
		if m["name"] == "dev" {
			found = str(m["id"])
		}
	}
	if found == "" {
		t.Fatalf("B's dashboard does not list A's session: %v", st["sessions"])
	}
	w := opB.do(t, http.MethodPost, "/api/sessions/"+found+"/watch", "{}")
	if u := str(w["url"]); !strings.HasSuffix(mon, strings.TrimPrefix(u, b.base)) {
		t.Fatalf("watch through B = %v; want the key of %s", w, mon)
	}

	// An approval pending on A is decided on B's dashboard; A's call goes on.
	done := make(chan map[string]any, 1)
	go func() {
		res, err := viaA.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: sess(map[string]any{"command": "echo approve-me now"})})
		if err != nil {
			done <- map[string]any{"protocolError": err.Error()}
			return
		}
		done <- mcptest.Check(t, "ssh_exec", res)
	}()
	pid := opB.pendingID(t, "echo approve-me now")
	opB.do(t, http.MethodPost, "/api/approvals/"+pid+"/decision", `{"approve":true}`)
	select {
	case got := <-done:
		if got["success"] != true || result(t, got)["stdout"] != "approve-me now\n" || got["approvalId"] != pid {
			t.Fatalf("approved call: %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's call did not continue within 10 s of B's approval")
	}

	// Internal endpoints and forwarded calls need the cluster's signature.
	for _, req := range []*http.Request{
		mustRequest(t, http.MethodGet, a.base+"/internal/v1/sessions/"+found+"/monitor-key", nil, nil),
		mustRequest(t, http.MethodGet, a.base+"/internal/v1/sessions/"+found+"/monitor-key", nil,
			map[string]string{"X-Tandem-Node": "x", "X-Tandem-Time": "1", "X-Tandem-Signature": "00"}),
		mustRequest(t, http.MethodPost, a.url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
			map[string]string{"X-Tandem-Node": "x", "X-Tandem-Time": "1", "X-Tandem-Signature": "00", "Authorization": "Bearer " + tok}),
	} {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s without a valid signature: %s; want 403", req.Method, req.URL.Path, resp.Status)
		}
	}
	// Ended through B, the session replays through B from A's recording.
	mustOK(t, viaB.Call(t, "ssh_disconnect", sess(nil)))
	var cast string
	if !waitFor(10*time.Second, func() bool {
		resp, err := http.Get(throughB + "/cast")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		cast = string(b)
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("the ended session's recording through B: %.300s", cast)
	}
	if !strings.HasPrefix(cast, `{"version":2`) || !strings.Contains(cast, "typed-via-b") {
		t.Fatalf("recording through B is not A's asciicast: %.300s", cast)
	}

	// A jti revoked through B (its config and the shared store) is refused
	// on A within a second: NOTIFY wakes A.
	if out, err := exec.Command(binary, "token", "revoke", jtiOf(t, tok), "--config", b.config, "--data-dir", b.dataDir, "--store", pg).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	revokedAt := time.Now()
	if !waitFor(5*time.Second, func() bool { return tokenRefused(a.url, tok) }) {
		t.Fatal("a token revoked through B still works on A after 5 s")
	}
	if d := time.Since(revokedAt); d > time.Second {
		t.Errorf("A refused the revoked token after %v; want within a second", d)
	}

	fams := scrape(t, b.base)
	for _, kind := range []string{"mcp", "monitor", "internal"} {
		if value(fams, "tandem_forwarded_requests_total", map[string]string{"kind": kind, "outcome": "ok"}) == 0 {
			t.Errorf("B's metrics count no %s forwards", kind)
		}
	}
}

func mustRequest(t *testing.T, method, url string, body []byte, headers map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return req
}

// tokenRefused reports whether the MCP endpoint at url refuses the bearer
// token (401), as it does a revoked one.
func tokenRefused(url, tok string) bool {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusUnauthorized
}

// TestSharedOperatorToken: the sign-in link of a cluster comes from the
// token file the nodes share, on the balancer's URL; a token file open to
// others, or too short, is refused.
func TestSharedOperatorToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "operator.token")
	tok := strings.Repeat("ab12", 16)
	if err := os.WriteFile(good, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := tandemCLI(t, "dashboard-url", "--token-file", good, "--web", "https://tandem.example.com/", "--data-dir", t.TempDir())
	if err != nil || strings.TrimSpace(out) != "https://tandem.example.com/?token="+tok {
		t.Fatalf("dashboard-url: %v %q", err, out)
	}
	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"group readable": {tok, 0o640},
		"too short":      {"short", 0o600},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(p, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		if out, err := tandemCLI(t, "dashboard-url", "--token-file", p, "--web", "https://tandem.example.com/", "--data-dir", t.TempDir()); err == nil || !strings.Contains(out, p) {
			t.Errorf("%s token file accepted: %s", name, out)
		}
	}
}

// TestForwardedCallOwnerDies: a call forwarded to the session's node,
// which is killed while the command runs, is answered node_unavailable
// with mayHaveRun: the command did start, and the agent must not be told
// that it did not run. A call after that, which cannot reach the dead node
// at all, did not run there, and says so.
func TestForwardedCallOwnerDies(t *testing.T) {
	ws, a, _, viaB, tokS := devOnA(t)
	marker := filepath.Join(ws, "started")
	replied := make(chan map[string]any, 1)
	go func() {
		replied <- viaB.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tokS,
			"command": "echo yes > " + marker + "; sleep 20"})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started on A")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	select {
	case r = <-replied:
	case <-time.After(15 * time.Second):
		t.Fatal("no reply through B after A died")
	}
	wantError(t, r, "node_unavailable")
	if r["mayHaveRun"] != true || strings.Contains(str(r["message"]), "did not run") {
		t.Fatalf("the command ran on A, but B's reply says otherwise: %v", r)
	}
	// A is gone: a call that cannot reach it did not run there, and says
	// so. B may still hold a kept-alive connection to A that it has not
	// seen close: a call written to it cannot be told from one A received,
	// so it is answered mayHaveRun, the safe side. The next one dials A.
	deadline = time.Now().Add(10 * time.Second)
	for {
		r = viaB.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tokS, "command": "true"})
		if str(r["error"]) == "node_unavailable" && r["mayHaveRun"] == nil {
			if !strings.Contains(str(r["message"]), "did not run") {
				t.Fatalf("a call that never reached A: %v", r)
			}
			break
		}
		switch {
		case str(r["error"]) == "session_ended":
			return // A's lease ran out already
		case str(r["error"]) != "node_unavailable" || r["mayHaveRun"] != true:
			t.Fatalf("a call after A died: %v", r)
		case time.Now().After(deadline):
			t.Fatalf("every call after A died says it may have run there: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterOutputReadAtOnce: the output resource a reply names can be read
// through any node as soon as the reply arrives. Other nodes find the
// command's node by its row in the shared store, which the journal writes
// after the command; a reply naming an output waits for that row, so a
// read sent at once through another node is never answered "not found".
func TestClusterOutputReadAtOnce(t *testing.T) {
	_, _, viaA, viaB, tokS := devOnA(t)
	for i := range 10 {
		via := viaA // the reply from the session's own node, the read through the other
		if i%2 == 1 {
			via = viaB
		}
		n := 20000 + i
		res := result(t, via.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tokS,
			"command": fmt.Sprintf("seq 1 %d", n)}))
		uri := str(res["stdoutResource"].(map[string]any)["uri"])
		rr, err := viaB.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=0"})
		if err != nil || len(rr.Contents) != 1 || !strings.HasSuffix(rr.Contents[0].Text, fmt.Sprintf("\n%d\n", n)) {
			t.Fatalf("round %d: %s read through B at once: %v", i, uri, err)
		}
	}
}

// devOnA starts two nodes on one PostgreSQL, with a local target in ws,
// and opens alice's session "dev" on the first, A. It returns A, alice's
// clients of A and of the second node, B (one bearer token, so one agent
// run), and the session's token.
func devOnA(t *testing.T) (ws string, a *httpServer, viaA, viaB *mcptest.Client, sessionToken string) {
	t.Helper()
	ws = t.TempDir()
	nodes, _ := startNodes(t, 2, testenv.Postgres(t), "targets: [{name: local, kind: local, workspace: "+ws+"}]\n")
	a = nodes[0]
	tok := a.token(t, "--tenant", "default", "--actor", "alice")
	viaA = a.client(t, tok)
	sessionToken = str(mustOK(t, viaA.Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	return ws, a, viaA, nodes[1].client(t, tok), sessionToken
}
