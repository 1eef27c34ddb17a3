package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestClusterActorsShareSid: the cluster's directory keys a session by
// tenant, actor and sid. Two actors whose tokens carry the same sid each
// have their own session "dev", on different nodes; neither lists nor
// reaches the other's through any node, and the second name is no clash.
func TestClusterActorsShareSid(t *testing.T) {
	ws := t.TempDir()
	nodes, _ := startNodes(t, 2, testenv.Postgres(t), "targets: [{name: local, kind: local, workspace: "+ws+"}]\n")
	a, b := nodes[0], nodes[1]
	alice := a.token(t, "--tenant", "default", "--actor", "alice", "--sid", "run-1")
	bob := a.token(t, "--tenant", "default", "--actor", "bob", "--sid", "run-1")
	aliceA, aliceB := a.client(t, alice), b.client(t, alice)
	bobA, bobB := a.client(t, bob), b.client(t, bob)

	tokAlice := str(mustOK(t, aliceA.Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	for name, c := range map[string]*mcptest.Client{"bob through B": bobB, "bob through A": bobA} {
		if l := mustOK(t, c.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"].([]any); len(l) != 0 {
			t.Fatalf("%s lists alice's sessions: %v", name, l)
		}
	}
	// Bob's own "dev", on B, is no clash with alice's on A.
	tokBob := str(mustOK(t, bobB.Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	// Each reaches their own through either node, and only their own.
	for _, tc := range []struct {
		name   string
		c      *mcptest.Client
		tok    string
		marker string
	}{
		{"alice through B", aliceB, tokAlice, "alice"},
		{"bob through A", bobA, tokBob, "bob"},
		{"alice through A", aliceA, tokAlice, "alice"},
		{"bob through B", bobB, tokBob, "bob"},
	} {
		r := result(t, mustOK(t, tc.c.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tc.tok,
			"command": "echo " + tc.marker})))
		if r["stdout"] != tc.marker+"\n" {
			t.Fatalf("%s: %v", tc.name, r)
		}
		l := mustOK(t, tc.c.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"].([]any)
		if len(l) != 1 {
			t.Fatalf("%s lists %v; want only their own dev", tc.name, l)
		}
	}
	// One actor's second "dev" on another node is a clash, told as one.
	wantError(t, aliceB.Call(t, "ssh_connect", map[string]any{"name": "dev"}), "session_exists")
	// Alice's token, but bob's session's token: refused, not forwarded to
	// bob's node as alice's.
	wantError(t, aliceA.Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tokBob, "command": "true"}), "invalid_session_token")
}

// signedRequest is a request between nodes as it crossed the wire.
type signedRequest struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestClusterReplayToAnotherNode: node A is reached through a proxy that
// keeps a copy of every signed request sent to it: B's call for A's
// monitor key, and a tool call B forwards to A. Each, replayed to B, is
// refused, and replayed to A, is refused too.
func TestClusterReplayToAnotherNode(t *testing.T) {
	ws := t.TempDir()
	pg := testenv.Postgres(t)
	var (
		target   atomic.Pointer[url.URL]
		mu       sync.Mutex
		captured []signedRequest
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Tandem-Signature") != "" {
			mu.Lock()
			captured = append(captured, signedRequest{r.Method, r.URL.RequestURI(), r.Header.Clone(), body})
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		httputil.NewSingleHostReverseProxy(target.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	secret, key := clusterFiles(t)
	opToken := "op-" + strings.Repeat("7", 40)
	opFile := filepath.Join(t.TempDir(), "operator.token")
	if err := os.WriteFile(opFile, []byte(opToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" +
		"cluster: {secretFile: " + secret + "}\nauth: {signingKey: " + key + "}\nweb: {operatorTokenFile: " + opFile + "}\n"
	a := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg, "--advertise-url", proxy.URL}})
	u, err := url.Parse(a.base)
	if err != nil {
		t.Fatal(err)
	}
	target.Store(u)
	b := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg}})

	tok := a.token(t, "--tenant", "default", "--actor", "alice")
	tokS := str(mustOK(t, a.client(t, tok).Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	// A forwarded tool call, and an internal call from B's dashboard.
	r := result(t, mustOK(t, b.client(t, tok).Call(t, "ssh_exec", map[string]any{"sessionName": "dev", "sessionToken": tokS, "command": "echo via-b"})))
	if r["stdout"] != "via-b\n" {
		t.Fatalf("through B: %v", r)
	}
	opB := operatorClient{base: b.base, token: opToken}
	id := ""
	for _, s := range opB.do(t, http.MethodGet, "/api/state", "")["sessions"].([]any) {
		if m := s.(map[string]any); m["name"] == "dev" {
			id = str(m["id"])
		}
	}
	opB.do(t, http.MethodPost, "/api/sessions/"+id+"/watch", "{}")

	mu.Lock()
	reqs := slices.Clone(captured)
	mu.Unlock()
	kinds := map[string]bool{}
	for _, c := range reqs {
		kinds[strings.SplitN(strings.TrimPrefix(c.path, "/"), "/", 2)[0]] = true
	}
	if !kinds["mcp"] || !kinds["internal"] {
		t.Fatalf("captured %d signed requests (%v); want a forwarded call and an internal one", len(reqs), kinds)
	}
	for _, c := range reqs {
		for node, base := range map[string]string{"B": b.base, "A": a.base} {
			req, err := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = c.header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s, replayed to node %s: %s %.200s; want 403", c.method, c.path, node, resp.Status, out)
			}
		}
	}
}
