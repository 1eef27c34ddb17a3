package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/store"
)

// twoTenants is a config with tenants acme and beta, each with its own
// local workspace directories.
type twoTenants struct {
	yaml                  string
	acmeBuild, acmeSecret string
	betaBuild             string
}

func newTwoTenants(t testing.TB, extra string) twoTenants {
	t.Helper()
	w := twoTenants{acmeBuild: t.TempDir(), acmeSecret: t.TempDir(), betaBuild: t.TempDir()}
	w.yaml = fmt.Sprintf(`tenants:
  - name: acme
    targets:
      - {name: build, kind: local, workspace: %s}
      - {name: secret, kind: local, workspace: %s}
    workspaces:
      - {name: ci, targets: [build]}
  - name: beta
    targets:
      - {name: build, kind: local, workspace: %s}
%s`, w.acmeBuild, w.acmeSecret, w.betaBuild, extra)
	return w
}

// TestHTTPTenantIsolation is the claims seed's checklist over real HTTP:
// tenant B reaches nothing of tenant A's, even holding A's session name and
// token, and another agent run of the same actor sees nothing either.
func TestHTTPTenantIsolation(t *testing.T) {
	w := newTwoTenants(t, "")
	s := startHTTP(t, httpOpts{config: w.yaml})
	tokA := s.token(t, "--tenant", "acme", "--actor", "alice", "--workspace", "ci", "--sid", "run1")
	tokB := s.token(t, "--tenant", "beta", "--actor", "bob")
	a, b := s.client(t, tokA), s.client(t, tokB)

	ra := mustOK(t, a.Call(t, "ssh_connect", map[string]any{"name": "main", "target": "build"}))
	sa := mcptest.Session{Name: "main", Token: str(ra["sessionToken"])}
	if ra["workspace"] != w.acmeBuild {
		t.Fatalf("acme's workspace = %v, want %s", ra["workspace"], w.acmeBuild)
	}
	if r := result(t, a.Call(t, "ssh_exec", execArgs(sa, "pwd"))); r["stdout"] != w.acmeBuild+"\n" {
		t.Fatalf("acme pwd = %q, want the configured workspace %s", r["stdout"], w.acmeBuild)
	}
	big := mustOK(t, a.Call(t, "ssh_exec", execArgs(sa, "echo secret-a > a.txt; seq 1 100000")))
	res, _ := result(t, big)["stdoutResource"].(map[string]any)
	idA, uriA := str(big["commandId"]), str(res["uri"])
	if idA == "" || uriA == "" {
		t.Fatalf("no commandId or resource for a large output: %v", mcptest.Short(big))
	}

	// B, with A's name and token, gets what a wrong token gets.
	if got := mustOK(t, b.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"]; len(got.([]any)) != 0 {
		t.Errorf("beta lists %v", got)
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"ssh_exec", execArgs(sa, "echo pwned")},
		{"ssh_cancel", sessArgs(sa)},
		{"ssh_get_monitoring_url", sessArgs(sa)},
		{"ssh_read_output", map[string]any{"sessionName": sa.Name, "sessionToken": sa.Token, "commandId": idA}},
		{"ssh_forward_port", map[string]any{"sessionName": sa.Name, "sessionToken": sa.Token, "port": 3000}},
		{"ssh_list_ports", sessArgs(sa)},
		{"ssh_disconnect", sessArgs(sa)},
	} {
		wantError(t, b.Call(t, tc.tool, tc.args), "invalid_session_token")
	}
	if _, err := b.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uriA}); err == nil {
		t.Error("beta read acme's output resource")
	}
	// Another tenant's target, a target outside the claim's workspace and a
	// name that exists nowhere all get the same answer.
	miss := func(c *mcptest.Client, name string) string {
		r := wantError(t, c.Call(t, "ssh_connect", map[string]any{"name": "x", "target": name}), "unknown_target")
		return strings.Replace(str(r["message"]), `"`+name+`"`, `"?"`, 1)
	}
	if m1, m2 := miss(b, "secret"), miss(b, "nope"); m1 != m2 {
		t.Errorf("another tenant's target answers %q, a missing one %q", m1, m2)
	}
	if m1, m2 := miss(a, "secret"), miss(a, "nope"); m1 != m2 || strings.Contains(m1, "secret") {
		t.Errorf("a target outside the workspace answers %q, a missing one %q", m1, m2)
	}

	// B's own session is confined to B's workspace.
	rb := mustOK(t, b.Call(t, "ssh_connect", map[string]any{"name": "main"}))
	sb := mcptest.Session{Name: "main", Token: str(rb["sessionToken"])}
	if r := result(t, b.Call(t, "ssh_exec", execArgs(sb, "pwd"))); r["stdout"] != w.betaBuild+"\n" {
		t.Fatalf("beta pwd = %q, want %s", r["stdout"], w.betaBuild)
	}
	if r := result(t, b.Call(t, "ssh_exec", execArgs(sb, "cat "+w.acmeBuild+"/a.txt"))); r["exitCode"] == 0.0 || strings.Contains(str(r["stdout"]), "secret-a") {
		t.Errorf("beta read acme's workspace: %v", r)
	}
	result(t, b.Call(t, "ssh_exec", execArgs(sb, "echo x > "+w.acmeBuild+"/b.txt")))
	if _, err := os.Stat(filepath.Join(w.acmeBuild, "b.txt")); err == nil {
		t.Error("beta wrote into acme's workspace")
	}

	// Another run of the same actor sees nothing; a refreshed token of the
	// same run keeps the session.
	other := s.client(t, s.token(t, "--tenant", "acme", "--actor", "alice", "--workspace", "ci", "--sid", "run2"))
	if got := mustOK(t, other.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"]; len(got.([]any)) != 0 {
		t.Errorf("another sid lists %v", got)
	}
	wantError(t, other.Call(t, "ssh_exec", execArgs(sa, "echo pwned")), "invalid_session_token")
	again := s.client(t, s.token(t, "--tenant", "acme", "--actor", "alice", "--workspace", "ci", "--sid", "run1"))
	if r := result(t, again.Call(t, "ssh_exec", execArgs(sa, "cat a.txt"))); r["stdout"] != "secret-a\n" {
		t.Errorf("a refreshed token of the same run: %v", r)
	}

	// The audit names tenant, actor, run, token and workspace; B's view of
	// it holds only B's records.
	recs := auditJSON(t, s.dataDir, "--tenant", "beta")
	if len(recs) == 0 {
		t.Fatal("no audit records for beta")
	}
	for _, r := range recs {
		if r.Tenant != "beta" {
			t.Errorf("audit tail --tenant beta shows %+v", r)
		}
	}
	var connect *store.AuditRecord
	for i, r := range auditJSON(t, s.dataDir, "--tenant", "acme") {
		if r.Tool == "ssh_connect" && r.Outcome == "ok" {
			connect = &auditJSON(t, s.dataDir, "--tenant", "acme")[i]
			break
		}
	}
	switch {
	case connect == nil:
		t.Fatal("no audited ssh_connect of acme")
	case connect.Actor != "alice" || connect.SID != "run1" || connect.JTI == "" || len(connect.ClaimFingerprint) != 64 ||
		connect.Workspace != "ci:"+w.acmeBuild || connect.Target != "build":
		t.Errorf("acme's connect record: %+v", *connect)
	}
	assertNoToken(t, s, tokA, tokB)
}

// assertNoToken greps the data dir and the log for bearer tokens, whole
// and by their signature part.
func assertNoToken(t *testing.T, s *httpServer, tokens ...string) {
	t.Helper()
	needles := map[string]bool{}
	for _, tok := range tokens {
		needles[tok] = true
		if i := strings.LastIndexByte(tok, '.'); i > 0 {
			needles[tok[i+1:]] = true
		}
	}
	check := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return
		}
		for n := range needles {
			if strings.Contains(string(b), n) {
				t.Errorf("%s holds a bearer token", path)
			}
		}
	}
	_ = filepath.Walk(s.dataDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			check(p)
		}
		return nil
	})
	check(s.stderr)
}

func execArgs(s mcptest.Session, cmd string) map[string]any {
	return map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": cmd}
}

func sessArgs(s mcptest.Session) map[string]any {
	return map[string]any{"sessionName": s.Name, "sessionToken": s.Token}
}

// auditJSON reads records with the real `tandem audit tail --json`.
func auditJSON(t testing.TB, dataDir string, args ...string) []store.AuditRecord {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"audit", "tail", "--json", "-n", "100000", "--data-dir", dataDir}, args...)...).Output()
	if err != nil {
		t.Fatalf("audit tail: %v", err)
	}
	var recs []store.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var r store.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// jtiOf reads a token's jti without verifying it.
func jtiOf(t testing.TB, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		JTI string `json:"jti"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.JTI
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// TestHTTPToolsClaim: a token whose tools omit ssh_exec does not list it
// and cannot call it.
func TestHTTPToolsClaim(t *testing.T) {
	w := newTwoTenants(t, "")
	s := startHTTP(t, httpOpts{config: w.yaml})
	c := s.client(t, s.token(t, "--tenant", "beta", "--actor", "ro", "--tools", "ssh_connect,ssh_list_sessions"))
	lt, err := c.CS.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "ssh_connect,ssh_list_sessions" {
		t.Errorf("tools/list = %v, want only the claim's tools", names)
	}
	r := mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "main"}))
	sess := mcptest.Session{Name: "main", Token: str(r["sessionToken"])}
	wantError(t, c.Call(t, "ssh_exec", execArgs(sess, "touch "+w.betaBuild+"/ran")), "tool_not_allowed")
	if _, err := os.Stat(filepath.Join(w.betaBuild, "ran")); err == nil {
		t.Error("a tool outside the claim ran")
	}
	// The full token lists everything: the thirteen ssh_ tools and permissions__approve.
	full := s.client(t, s.token(t, "--tenant", "beta", "--actor", "rw"))
	if lt, err := full.CS.ListTools(context.Background(), nil); err != nil || len(lt.Tools) != 14 {
		t.Errorf("a token without tools lists %d tools (%v)", len(lt.Tools), err)
	}
}

// TestHTTPListener: a non-loopback address needs TLS or an explicit
// --insecure-http; with a certificate tandem serves HTTPS.
func TestHTTPListener(t *testing.T) {
	w := newTwoTenants(t, "")
	home := t.TempDir()
	cfg := filepath.Join(home, "tandem.yaml")
	if err := os.WriteFile(cfg, []byte(w.yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binary, "serve", "--http", "0.0.0.0:0", "--config", cfg, "--data-dir", filepath.Join(home, "state")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--tls-cert") || !strings.Contains(string(out), "--insecure-http") {
		t.Fatalf("plain HTTP on all interfaces: err %v, output %s", err, out)
	}
	certFile, keyFile := selfSigned(t)
	s := startHTTP(t, httpOpts{config: w.yaml, args: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	if !strings.HasPrefix(s.url, "https://127.0.0.1:") {
		t.Fatalf("endpoint %s, want https", s.url)
	}
	c := s.clientWith(t, s.token(t, "--tenant", "beta", "--actor", "tls"), insecureTLS())
	r := mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "main"}))
	if !strings.HasPrefix(str(r["monitoringUrl"]), "https://") {
		t.Errorf("monitoring URL over TLS: %v", r["monitoringUrl"])
	}
}
