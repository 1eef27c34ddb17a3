package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTimeoutsFitTheClients: through the TypeScript SDK with its default
// 60 s request timeout, a command longer than that answers
// command_timeout with its commandId before the client gives up (the
// default timeoutSeconds was 120); and after the client cancels a call,
// ssh_list_sessions names the command and ssh_read_output returns its
// output, and the audit names it (issue 18).
func TestTimeoutsFitTheClients(t *testing.T) {
	t.Parallel() // it waits out the default timeout
	ws := t.TempDir()
	dataDir := filepath.Join(t.TempDir(), "state")
	ts := startTSClient(t, "serve", "--workspace", ws, "--data-dir", dataDir, "--web", "127.0.0.1:0", "--log-level", "info")
	tok := ts.mustDo(t, map[string]any{"op": "connect", "name": "long"}).Token
	args := func(cmd string) map[string]any {
		return map[string]any{"sessionName": "long", "sessionToken": tok, "command": cmd}
	}
	call := func(tool string, a map[string]any) map[string]any {
		t.Helper()
		return ts.mustDo(t, map[string]any{"op": "call", "tool": tool, "args": a}).Reply
	}

	start := time.Now()
	r := wantError(t, call("ssh_exec", args("echo begun; sleep 70")), "command_timeout")
	took := time.Since(start)
	if r["commandId"] == nil || took > 58*time.Second || took < 45*time.Second {
		t.Fatalf("sleep 70 answered after %v: %v", took, r)
	}
	cancel := call("ssh_cancel", map[string]any{"sessionName": "long", "sessionToken": tok})
	if mustOK(t, cancel); !strings.Contains(str(cancel["message"]), "Ctrl-C") {
		t.Errorf("cancel message: %v", cancel["message"])
	}

	// The client gives up on a call: its command is interrupted, and can
	// be found and read back.
	started := filepath.Join(ws, "started")
	marker := "echo cancelled-output; touch " + started + "; sleep 61"
	callErr := ts.mustDo(t, map[string]any{"op": "cancel", "tool": "ssh_exec", "args": args(marker), "when": started}).Error
	if !strings.Contains(strings.ToLower(callErr), "cancel") {
		t.Errorf("the cancelled call ended with %q", callErr)
	}
	var last map[string]any
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sessions, _ := mustOK(t, call("ssh_list_sessions", map[string]any{}))["sessions"].([]any)
		if len(sessions) == 1 {
			last, _ = sessions[0].(map[string]any)["lastCommand"].(map[string]any)
		}
		if last != nil && last["command"] == marker && last["state"] == "ended" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ssh_list_sessions never named the cancelled command: %v", last)
		}
	}
	out := mustOK(t, call("ssh_read_output", map[string]any{"sessionName": "long", "sessionToken": tok, "commandId": last["commandId"]}))
	if out["data"] != "cancelled-output\n" || out["running"] != false {
		t.Errorf("read back the cancelled command: %v", out)
	}
	if auditedOutcome(t, dataDir, "cancelled-output") != "cancelled" {
		t.Error("the cancel was not audited as cancelled")
	}
	for _, rec := range auditJSON(t, dataDir) {
		var a map[string]any
		_ = json.Unmarshal(rec.Args, &a)
		if rec.Tool == "ssh_exec" && a["command"] == marker && !strings.Contains(rec.Reason, str(last["commandId"])) {
			t.Errorf("the cancelled call's audit record does not name its command: %+v", rec)
		}
	}
}
