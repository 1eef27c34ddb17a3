package main

import (
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
