package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// operatorClient speaks to a tandem's dashboard API as its page does: the
// operator cookie, the page's own Origin.
type operatorClient struct {
	base, token string
}

func newOperatorClient(t *testing.T, srv *tandemProc) operatorClient {
	t.Helper()
	u, err := url.Parse(dashboardLink(t, srv.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	return operatorClient{base: u.Scheme + "://" + u.Host, token: u.Query().Get("token")}
}

func (o operatorClient) do(t *testing.T, method, path, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, o.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: o.token})
	if method == http.MethodPost {
		req.Header.Set("Origin", o.base)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return m
}

// pendingID waits until the tandem has a pending approval of command and
// returns its id.
func (o operatorClient) pendingID(t *testing.T, command string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st := o.do(t, http.MethodGet, "/api/state", "")
		pending, _ := st["pending"].([]any)
		for _, p := range pending {
			a, _ := p.(map[string]any)
			act, _ := a["action"].(map[string]any)
			if act["command"] == command {
				return str(a["id"])
			}
		}
		time.Sleep(20 * time.Millisecond) // polling the operator's view, as the page would
	}
	t.Fatalf("no pending approval of %q upstream", command)
	return ""
}

// forwardConfig forwards every command to the upstream at url, with the
// operator token in tokenFile. Its one target has no network and ad-hoc
// hosts are off, so a plain-http loopback upstream is accepted.
func forwardConfig(ws, url, tokenFile string) string {
	return "allowAdHoc: false\ntargets: [{name: local, kind: local, workspace: " + ws + "}]\n" + `policy:
  mode: forward
  rules:
    - {tool: ssh_connect, decision: allow}
    - {tool: ssh_disconnect, decision: allow}
  forward: {url: "` + url + `", tokenFile: "` + tokenFile + `"}
approvals: {waitSeconds: 60}
`
}

// TestForwardBetweenTandems: a child tandem forwards its agent's command;
// the parent's policy asks; the parent's dashboard answers; the child's
// command runs, or is denied with the parent's reason. An upstream that
// is down denies, saying so.
func TestForwardBetweenTandems(t *testing.T) {
	parentCfg := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
	parent := startServer(t, serverOpts{config: parentCfg})
	op := newOperatorClient(t, parent)
	tokenFile := filepath.Join(parent.dataDir, "dashboard.token")
	child := startServer(t, serverOpts{config: forwardConfig(t.TempDir(), op.base+"/api/approvals", tokenFile)})
	tok := str(mustOK(t, child.call(t, "ssh_connect", map[string]any{"name": "kid"}))["sessionToken"])
	kid := sess{child, "kid", tok}

	for _, tc := range []struct {
		command string
		approve bool
	}{{"echo forwarded-yes", true}, {"echo forwarded-no", false}} {
		replies := make(chan map[string]any, 1)
		go func() { replies <- kid.exec(t, tc.command) }()
		id := op.pendingID(t, tc.command)
		op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", `{"approve":`+map[bool]string{true: "true", false: "false"}[tc.approve]+`,"reason":"parent says so"}`)
		var r map[string]any
		select {
		case r = <-replies:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the child did not answer after the parent decided", tc.command)
		}
		if tc.approve {
			if got := result(t, r)["stdout"]; got != "forwarded-yes\n" {
				t.Fatalf("approved upstream: %v", r)
			}
			continue
		}
		e := wantError(t, r, "approval_denied")
		if e["decidedBy"] != "upstream" || !strings.Contains(str(e["reason"]), "parent says so") {
			t.Errorf("denied upstream: %v", e)
		}
	}

	// The upstream is down: a clear denial, nothing runs.
	ws := t.TempDir()
	down := startServer(t, serverOpts{config: forwardConfig(ws, "http://127.0.0.1:1/api/approvals", tokenFile)})
	dtok := str(mustOK(t, down.call(t, "ssh_connect", map[string]any{"name": "d"}))["sessionToken"])
	e := wantError(t, sess{down, "d", dtok}.exec(t, "touch never"), "approval_denied")
	if !strings.Contains(str(e["reason"]), "could not be reached") {
		t.Errorf("upstream down: %v", e)
	}
	if _, err := os.Stat(filepath.Join(ws, "never")); err == nil {
		t.Error("the command ran with its upstream down")
	}
}

// forwardBody is a forwarded approval of command for tenant.
func forwardBody(tenant, command string) string {
	return `{"approval":{"id":"apr_child","action":{"tenant":"` + tenant + `","sessionId":"s1","sessionName":"kid","tool":"ssh_exec","command":"` + command + `"}},"waitSeconds":1}`
}

// TestForwardWithApproverClaim: in HTTP mode a claim with the approver
// role may forward approvals, as the operator token may; an ordinary
// agent's claim may not.
func TestForwardWithApproverClaim(t *testing.T) {
	s := startHTTP(t, httpOpts{config: askConfig(t.TempDir())})
	body := forwardBody("default", "echo up")
	post := func(token string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, s.base+"/api/approvals", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := post(s.token(t, "--tenant", "default", "--actor", "agent")); code != http.StatusUnauthorized {
		t.Errorf("an agent's claim forwarded an approval: %d %v", code, m)
	}
	code, m := post(s.token(t, "--tenant", "default", "--actor", "boss", "--roles", "approver"))
	if code != http.StatusOK || m["behavior"] != "pending" || !strings.HasPrefix(str(m["id"]), "apr_") {
		t.Fatalf("approver's claim: %d %v, want pending (the policy asks; nobody answered)", code, m)
	}
	if strings.Contains(s.log(), "eyJ") {
		t.Error("a bearer token reached the log")
	}
}

// TestForwardUpstreamProvesItself: a config whose loopback http upstream a
// session could squat (a target with network: true) is refused at start,
// naming why; an https upstream whose certificate is not trusted receives
// nothing, so no token, and the forwarded approval is denied here.
func TestForwardUpstreamProvesItself(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "parent.token")
	if err := os.WriteFile(tokenFile, []byte("op-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	squat := strings.Replace(forwardConfig(t.TempDir(), "http://127.0.0.1:7777/api/approvals", tokenFile),
		"kind: local,", "kind: local, network: true,", 1)
	p := filepath.Join(dir, "tandem.yaml")
	if err := os.WriteFile(p, []byte(squat), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := tandemCLI(t, "serve", "--config", p, "--data-dir", filepath.Join(dir, "state"))
	if err == nil || !strings.Contains(out, "policy.forward.url: plain http on loopback") || !strings.Contains(out, `local target "local" has network: true`) {
		t.Fatalf("the squattable config: exit %v, output %q", err, out)
	}

	var asked atomic.Int32
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"behavior":"allow"}`)
	}))
	t.Cleanup(up.Close)
	ws := t.TempDir()
	child := startServer(t, serverOpts{config: forwardConfig(ws, up.URL+"/api/approvals", tokenFile)})
	tok := str(mustOK(t, child.call(t, "ssh_connect", map[string]any{"name": "kid"}))["sessionToken"])
	e := wantError(t, sess{child, "kid", tok}.exec(t, "touch forwarded"), "approval_denied")
	if !strings.Contains(str(e["reason"]), "could not be reached") || !strings.Contains(str(e["reason"]), "certificate") {
		t.Errorf("untrusted upstream: %v", e)
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the untrusted upstream received %d requests", n)
	}
	if _, err := os.Stat(filepath.Join(ws, "forwarded")); err == nil {
		t.Error("the command ran although its upstream could not be trusted")
	}
}

// TestForwardTenantBound: an approver's claim has actions decided only for
// its own tenant, and nobody, the operator included, for a tenant this
// tandem does not serve: both are denied (under a policy that would allow
// everything), never asked or allowed.
func TestForwardTenantBound(t *testing.T) {
	cfg := "tenants:\n" +
		"  - {name: acme, targets: [{name: w, kind: local, workspace: " + t.TempDir() + "}]}\n" +
		"  - {name: beta, targets: [{name: w, kind: local, workspace: " + t.TempDir() + "}]}\n" +
		"policy: {mode: allow}\n"
	s := startHTTP(t, httpOpts{config: cfg})
	opTok, err := os.ReadFile(filepath.Join(s.dataDir, "dashboard.token"))
	if err != nil {
		t.Fatal(err)
	}
	acmeApprover := s.token(t, "--tenant", "acme", "--actor", "boss", "--roles", "approver")
	for _, tc := range []struct {
		name, token, tenant, want, msg string
	}{
		{"approver, own tenant", acmeApprover, "acme", "allow", ""},
		{"approver, another tenant", acmeApprover, "beta", "deny", `claim is for tenant \"acme\"`},
		{"approver, unknown tenant", acmeApprover, "ghost", "deny", `claim is for tenant \"acme\"`},
		{"operator, any served tenant", strings.TrimSpace(string(opTok)), "beta", "allow", ""},
		{"operator, unknown tenant", strings.TrimSpace(string(opTok)), "ghost", "deny", `serves no tenant \"ghost\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, s.base+"/api/approvals", strings.NewReader(forwardBody(tc.tenant, "rm -rf /srv")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tc.token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s", resp.Status, b)
			}
			if m["behavior"] != tc.want || !strings.Contains(string(b), tc.msg) {
				t.Fatalf("got %s, want %s with %s", b, tc.want, tc.msg)
			}
		})
	}
}
