package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestSharedPostgres: two HTTP nodes with their own data dirs share one
// real PostgreSQL. Each serves its own sessions, neither ends the other's,
// their calls land in one audit chain that verifies, and a token revoked
// through the shared store is refused within about a second.
func TestSharedPostgres(t *testing.T) {
	pg := testenv.Postgres(t)
	cfg := askConfig(t.TempDir())
	cfg = strings.Replace(cfg, "mode: ask", "mode: allow", 1)
	a := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg}})
	tokA := a.token(t, "--tenant", "default", "--actor", "alice")
	ca := a.client(t, tokA)
	sa := str(mustOK(t, ca.Call(t, "ssh_connect", map[string]any{"name": "on-a"}))["sessionToken"])

	// B starts after A: A's session stays alive (A's heartbeat is fresh).
	b := startHTTP(t, httpOpts{config: cfg, args: []string{"--store", pg}})
	cb := b.client(t, b.token(t, "--tenant", "default", "--actor", "bob"))
	sb := str(mustOK(t, cb.Call(t, "ssh_connect", map[string]any{"name": "on-b"}))["sessionToken"])
	for i := 0; i < 5; i++ {
		if r := result(t, ca.Call(t, "ssh_exec", map[string]any{"sessionName": "on-a", "sessionToken": sa, "command": "echo a"})); r["stdout"] != "a\n" {
			t.Fatalf("node A after B started: %v", r)
		}
		if r := result(t, cb.Call(t, "ssh_exec", map[string]any{"sessionName": "on-b", "sessionToken": sb, "command": "echo b"})); r["stdout"] != "b\n" {
			t.Fatalf("node B: %v", r)
		}
	}

	// One chain, both nodes' records in it.
	out, err := tandemCLI(t, "audit", "verify", "--store", pg)
	if err != nil || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify --store: %v\n%s", err, out)
	}
	tail, err := tandemCLI(t, "audit", "tail", "--store", pg, "-n", "1000")
	if err != nil || !strings.Contains(tail, "on-a") || !strings.Contains(tail, "on-b") {
		t.Fatalf("audit tail --store: %v\n%s", err, tail)
	}

	// Revoked through the shared store (from B's side): A refuses it.
	if out, err := exec.Command(binary, "token", "revoke", jtiOf(t, tokA), "--config", b.config, "--data-dir", b.dataDir, "--store", pg).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	revokedAt := time.Now()
	if !waitFor(5*time.Second, func() bool { return tokenRefused(a.url, tokA) }) {
		t.Fatal("a token revoked in the shared store still works on node A after 5 s")
	}
	if d := time.Since(revokedAt); d > 1500*time.Millisecond {
		t.Errorf("revocation took %v on the other node, want about a second", d)
	}
}

// TestStoreUnreachable: a node whose PostgreSQL cannot be reached says so
// and exits non-zero.
func TestStoreUnreachable(t *testing.T) {
	out, err := tandemCLI(t, "serve", "--store", "postgres://tandem@127.0.0.1:1/tandem?connect_timeout=2", "--data-dir", t.TempDir(), "--web", "127.0.0.1:0")
	if err == nil || !strings.Contains(out, "cannot reach PostgreSQL at 127.0.0.1:1") || !strings.Contains(out, "is PostgreSQL running?") {
		t.Fatalf("serve with PostgreSQL down: %v\n%s", err, out)
	}
	if _, err := tandemCLI(t, "serve", "--store", "mysql://x", "--data-dir", t.TempDir()); err == nil {
		t.Fatal("serve accepted a store URL it cannot use")
	}
}

// TestNodeLost: a node killed with SIGKILL stops renewing its lease; a
// node sharing the store ends its sessions with node_lost within the
// lease and a heartbeat, audits each once, and answers a call naming one
// with session_ended, node_lost and the reconnect hint.
func TestNodeLost(t *testing.T) {
	pg := testenv.Postgres(t)
	a := startServer(t, serverOpts{args: []string{"--store", pg}})
	b := startServer(t, serverOpts{args: []string{"--store", pg}})
	tok := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "doomed"}))["sessionToken"])
	mustOK(t, b.call(t, "ssh_connect", map[string]any{"name": "survivor"}))
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.waitExit(t, 10*time.Second)
	killed := time.Now()

	lost := func() int {
		out, err := tandemCLI(t, "audit", "tail", "--store", pg, "--json", "-n", "1000")
		if err != nil {
			t.Fatalf("audit tail: %v\n%s", err, out)
		}
		return strings.Count(out, `"event":"node_lost"`)
	}
	// The lease is three missed 5 s heartbeats; the reap runs on the next.
	if !waitFor(30*time.Second, func() bool { return lost() > 0 }) {
		t.Fatal("the lost node's session was not ended within 30 s")
	}
	t.Logf("node_lost %v after the kill", time.Since(killed).Round(time.Second))
	if n := lost(); n != 1 {
		t.Errorf("%d node_lost records, want 1", n)
	}
	e := wantError(t, b.call(t, "ssh_exec", map[string]any{"sessionName": "doomed", "sessionToken": tok, "command": "true"}), "session_ended")
	if e["reason"] != "node_lost" || !strings.Contains(str(e["message"]), "ssh_connect {") {
		t.Errorf("a call naming the lost session: %v", e)
	}
	if out, err := tandemCLI(t, "audit", "verify", "--store", pg); err != nil {
		t.Fatalf("audit verify: %v\n%s", err, out)
	}
}
