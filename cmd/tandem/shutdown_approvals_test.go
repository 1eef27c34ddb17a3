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

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// shutdownPolicy asks before echo approve-me, and lets the call wait.
const shutdownPolicy = `policy:
  mode: allow
  rules:
    - {tool: ssh_exec, command: "echo approve-me *", decision: ask}
approvals: {waitSeconds: 60}
`

// TestShutdownDeniesApprovals: SIGTERM with an approval pending. The
// waiting call is denied (server_shutdown) and runs nothing; the audit
// has approval_decided with server_shutdown; the store's row is no longer
// pending; and in a cluster, the other node's dashboard drops it.
func TestShutdownDeniesApprovals(t *testing.T) {
	for _, mode := range []string{"sqlite", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			ws := t.TempDir()
			cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + shutdownPolicy
			var a *httpServer
			var watcher operatorClient // a dashboard that lists a's approval
			var st store.Store
			var auditArgs []string
			switch mode {
			case "sqlite":
				a = startHTTP(t, httpOpts{config: cfg})
				tok, err := os.ReadFile(filepath.Join(a.dataDir, "dashboard.token"))
				if err != nil {
					t.Fatal(err)
				}
				watcher = operatorClient{base: a.base, token: strings.TrimSpace(string(tok))}
			case "cluster":
				pg := testenv.Postgres(t)
				nodes, opToken := startNodes(t, 2, pg, cfg)
				a, watcher = nodes[0], operatorClient{base: nodes[1].base, token: opToken}
				db, err := postgres.Open(context.Background(), pg)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				st, auditArgs = db, []string{"--store", pg}
			}
			c := a.client(t, a.token(t, "--tenant", "default", "--actor", "alice"))
			tok := str(mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "w"}))["sessionToken"])
			replies := make(chan map[string]any, 1)
			go func() {
				replies <- c.Call(t, "ssh_exec", map[string]any{"sessionName": "w", "sessionToken": tok,
					"command": "echo approve-me > approved.txt"})
			}()
			id := watcher.pendingID(t, "echo approve-me > approved.txt")

			if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-replies:
				e := wantError(t, r, "approval_denied")
				if e["reason"] != "server_shutdown" || e["approvalId"] != id {
					t.Errorf("the waiting call after SIGTERM: %v", e)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the waiting call did not answer after SIGTERM")
			}
			if !waitFor(20*time.Second, func() bool { return !testenv.Running(a.cmd.Process.Pid) }) {
				t.Fatal("tandem did not exit after SIGTERM")
			}
			if _, err := os.Stat(filepath.Join(ws, "approved.txt")); err == nil {
				t.Error("the command ran after its approval was denied")
			}

			decided := false
			for _, r := range auditJSON(t, a.dataDir, auditArgs...) {
				if r.ApprovalID == id && r.Event == "approval_decided" {
					decided = r.Outcome == "denied" && r.Reason == "server_shutdown"
				}
			}
			if !decided {
				t.Errorf("no approval_decided (denied, server_shutdown) for %s in the audit", id)
			}
			if st == nil {
				db, err := sqlite.Open(context.Background(), a.dataDir)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				st = db
			}
			pending, err := st.PendingApprovals(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pending {
				if p.ID == id {
					t.Errorf("the store still holds %s pending after the process is gone: %+v", id, p)
				}
			}
			if mode == "cluster" && !waitFor(10*time.Second, func() bool { return !listsPending(t, watcher, id) }) {
				t.Errorf("the other node's dashboard still lists %s after its node shut down", id)
			}
		})
	}
}

// listsPending says whether a dashboard lists approval id as pending.
func listsPending(t *testing.T, o operatorClient, id string) bool {
	st := o.do(t, http.MethodGet, "/api/state", "")
	pending, _ := st["pending"].([]any)
	for _, p := range pending {
		if a, _ := p.(map[string]any); a["id"] == id {
			return true
		}
	}
	return false
}

// TestClientGoneDeniesApprovals: over stdio, the client leaving ends
// tandem; an approval its call left pending is denied with
// server_shutdown, audited, and not pending in the store.
func TestClientGoneDeniesApprovals(t *testing.T) {
	srv := startServer(t, serverOpts{config: askConfig(t.TempDir())})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "w"}))["sessionToken"])
	e := wantError(t, sess{srv, "w", tok}.exec(t, "echo waiting"), "approval_pending")
	id := str(e["approvalId"])
	_ = srv.cs.Close() // closes stdin and waits for the process
	srv.waitExit(t, 20*time.Second)
	decided := false
	for _, r := range auditRecords(t, srv.dataDir) {
		decided = decided || (r.ApprovalID == id && r.Event == "approval_decided" && r.Outcome == "denied" && r.Reason == "server_shutdown")
	}
	if !decided {
		t.Errorf("no approval_decided (denied, server_shutdown) for %s", id)
	}
	db, err := sqlite.Open(context.Background(), srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	pending, err := db.PendingApprovals(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 {
		t.Errorf("pending in the store after the process ended: %+v", pending)
	}
}
