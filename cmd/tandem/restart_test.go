package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/tandem-sh/tandem/internal/store"
)

// httpGet fetches a page of tandem's web listener.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

// tandemCLI runs the built binary, e.g. `tandem audit verify`.
func tandemCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func auditRecords(t *testing.T, dataDir string) []store.AuditRecord {
	t.Helper()
	out, err := tandemCLI(t, "audit", "tail", "--data-dir", dataDir, "--json", "-n", "100000")
	if err != nil {
		t.Fatalf("audit tail: %v\n%s", err, out)
	}
	var recs []store.AuditRecord
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r store.AuditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit tail line %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestRestartStory: sessions never survive a restart. A killed server's
// session is reported ended with server_restart by the next one, the audit
// chain verifies, and every acknowledged call has its record.
func TestRestartStory(t *testing.T) {
	home := t.TempDir()
	a := startServer(t, serverOpts{home: home})
	tok := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "old"}))["sessionToken"])
	s := sess{a, "old", tok}
	oldURL := str(mustOK(t, a.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "old", "sessionToken": tok}))["monitoringUrl"])
	acked := map[string]int{"ssh_connect": 1, "ssh_get_monitoring_url": 1}
	for _, cmd := range []string{"echo one", "cd /tmp", "echo two"} {
		mustOK(t, s.exec(t, cmd))
		acked["ssh_exec"]++
	}
	// The recording is written behind the terminal, not before the reply:
	// kill only once it shows what the human saw, as the replay must.
	waitRecording(t, a.dataDir, "two")
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.waitExit(t, 10*time.Second)

	b := startServer(t, serverOpts{home: home})
	e := wantError(t, b.call(t, "ssh_exec", map[string]any{"sessionName": "old", "sessionToken": tok, "command": "echo ghost"}), "session_ended")
	if e["reason"] != "server_restart" || !strings.Contains(str(e["message"]), "restarted") || !strings.Contains(str(e["message"]), "ssh_connect {") {
		t.Errorf("ended reply: %v", e)
	}
	// The wrong token learns nothing.
	wantError(t, b.call(t, "ssh_exec", map[string]any{"sessionName": "old", "sessionToken": "guess", "command": "true"}), "invalid_session_token")

	// The old session's recording replays from the new server.
	newTok := str(mustOK(t, b.call(t, "ssh_connect", map[string]any{"name": "new"}))["sessionToken"])
	bURL := str(mustOK(t, b.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "new", "sessionToken": newTok}))["monitoringUrl"])
	replay := bURL[:strings.Index(bURL, "/s/")] + oldURL[strings.Index(oldURL, "/s/"):]
	if body := httpGet(t, replay); !strings.Contains(body, "replay") {
		t.Errorf("no replay page for the old session at %s", replay)
	}
	if cast := httpGet(t, replay+"/cast"); !strings.Contains(cast, `"version": 2`) && !strings.Contains(cast, `"version":2`) || !strings.Contains(cast, "two") {
		t.Errorf("old session's cast: %.300q", cast)
	}

	if out, err := tandemCLI(t, "audit", "verify", "--data-dir", b.dataDir); err != nil || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify after SIGKILL: %v\n%s", err, out)
	}
	got := map[string]int{}
	restarts := 0
	for _, r := range auditRecords(t, b.dataDir) {
		if r.SessionName == "old" && r.Event == "tool_call" && r.Outcome == "ok" {
			got[r.Tool]++
		}
		if r.SessionName == "old" && r.Event == "server_restart" {
			restarts++
		}
	}
	for tool, n := range acked {
		if got[tool] != n {
			t.Errorf("%s: %d acknowledged calls, %d audit records", tool, n, got[tool])
		}
	}
	if restarts != 1 {
		t.Errorf("want one server_restart record for the old session, got %d", restarts)
	}
}

// TestLiveNeighboursUntouched: several tandem processes share a data dir
// (each MCP client spawns its own); a starting one never ends a live
// neighbour's session.
func TestLiveNeighboursUntouched(t *testing.T) {
	home := t.TempDir()
	a := startServer(t, serverOpts{home: home})
	b := startServer(t, serverOpts{home: home})
	ta := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "a"}))["sessionToken"])
	tb := str(mustOK(t, b.call(t, "ssh_connect", map[string]any{"name": "b"}))["sessionToken"])
	c := startServer(t, serverOpts{home: home})
	mustOK(t, c.call(t, "ssh_list_sessions", map[string]any{}))
	for _, s := range []sess{{a, "a", ta}, {b, "b", tb}} {
		if r := result(t, s.exec(t, "echo alive")); r["stdout"] != "alive\n" {
			t.Errorf("%s after a neighbour started: %v", s.name, r)
		}
	}
	if out, err := tandemCLI(t, "audit", "verify", "--data-dir", filepath.Join(home, "state")); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
}

// TestKill9MidBurst: a SIGKILL in the middle of a burst of calls leaves an
// audit chain that verifies, and every call whose reply the client got has
// its record.
func TestKill9MidBurst(t *testing.T) {
	home := t.TempDir()
	a := startServer(t, serverOpts{home: home})
	tok := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "burst"}))["sessionToken"])
	args := map[string]any{"sessionName": "burst", "sessionToken": tok, "command": "true"}
	go func() {
		time.Sleep(700 * time.Millisecond)
		_ = a.cmd.Process.Signal(syscall.SIGKILL)
	}()
	acked := 0
	for {
		res, err := a.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: args})
		if err != nil {
			break
		}
		if res.IsError {
			t.Fatalf("call failed before the kill: %+v", res.Content)
		}
		acked++
	}
	a.waitExit(t, 10*time.Second)
	if acked < 10 {
		t.Fatalf("only %d calls before the kill; the burst did not happen", acked)
	}
	if out, err := tandemCLI(t, "audit", "verify", "--data-dir", a.dataDir); err != nil {
		t.Fatalf("verify after kill -9: %v\n%s", err, out)
	}
	recorded := 0
	for _, r := range auditRecords(t, a.dataDir) {
		if r.SessionName == "burst" && r.Tool == "ssh_exec" && r.Outcome == "ok" {
			recorded++
		}
	}
	if recorded < acked {
		t.Errorf("%d calls acknowledged, only %d audited", acked, recorded)
	}
	t.Logf("%d acknowledged calls, %d audited before the kill", acked, recorded)
}

// TestClientLeavingEndsAndAuditsSessions: when the MCP client goes away the
// process ends its sessions, and every end reaches the audit log before
// the store closes.
func TestClientLeavingEndsAndAuditsSessions(t *testing.T) {
	for i := 0; i < 3; i++ {
		srv := startServer(t, serverOpts{})
		for _, name := range []string{"one", "two"} {
			mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": name}))
		}
		_ = srv.cs.Close() // closes stdin and waits for the process
		if ps := srv.cmd.ProcessState; ps == nil || !ps.Success() {
			t.Fatalf("tandem did not exit cleanly: %v", ps)
		}
		if strings.Contains(srv.log(), "level=ERROR") {
			t.Fatalf("errors at shutdown:\n%s", srv.log())
		}
		ends := 0
		for _, r := range auditRecords(t, srv.dataDir) {
			if r.Event == "session_end" {
				ends++
			}
		}
		if ends != 2 {
			t.Fatalf("round %d: %d session_end records, want 2", i, ends)
		}
	}
}

// waitRecording waits until a recording in dataDir holds text.
func waitRecording(t *testing.T, dataDir, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		files, _ := filepath.Glob(filepath.Join(dataDir, "recordings", "*.cast"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), text) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // the recording's flusher writes every few ms
	}
	t.Fatalf("no recording in %s shows %q after 10 s", dataDir, text)
}
