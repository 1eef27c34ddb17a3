package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestGracefulShutdown: on SIGTERM tandem starts no new session, lets the
// running command finish and answer, then ends every session with
// server_shutdown, audited, and exits.
func TestGracefulShutdown(t *testing.T) {
	ws := t.TempDir()
	s := startHTTP(t, httpOpts{config: "targets: [{name: local, kind: local, workspace: " + ws + "}]\n",
		args: []string{"--shutdown-grace", "20s"}})
	c := s.client(t, s.token(t, "--tenant", "default", "--actor", "a"))
	tok := str(mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "g"}))["sessionToken"])
	replies := make(chan map[string]any, 1)
	go func() {
		replies <- c.Call(t, "ssh_exec", map[string]any{"sessionName": "g", "sessionToken": tok,
			"command": "touch started; sleep 1; echo finished"})
	}()
	if !waitFor(15*time.Second, func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil }) {
		t.Fatal("the command never started")
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	n := 0
	if !waitFor(10*time.Second, func() bool {
		n++
		r := c.Call(t, "ssh_connect", map[string]any{"name": fmt.Sprintf("late%d", n)})
		return r["error"] == "server_shutting_down"
	}) {
		t.Fatal("new sessions were still accepted after SIGTERM")
	}
	select {
	case r := <-replies:
		if res := result(t, r); res["stdout"] != "finished\n" {
			t.Fatalf("the running command after SIGTERM: %v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the running command did not answer")
	}
	start := time.Now()
	if !waitFor(15*time.Second, func() bool { return !testenv.Running(s.cmd.Process.Pid) }) {
		t.Fatal("tandem did not exit after its sessions' commands ended")
	}
	t.Logf("exited %v after the command answered", time.Since(start))
	ended := false
	for _, r := range auditJSON(t, s.dataDir) {
		ended = ended || (r.SessionName == "g" && r.Event == "session_end" && r.Reason == "server_shutdown")
	}
	if !ended {
		t.Error("no session_end record with server_shutdown for the drained session")
	}
}
