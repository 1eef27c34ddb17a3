package mcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
)

// memAudit keeps audit records in memory.
type memAudit struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (m *memAudit) Append(_ context.Context, r audit.Record) (audit.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs = append(m.recs, r)
	return r, nil
}

func (m *memAudit) Ready(context.Context) error { return nil }

// TestSendInputAnswersPrompts: the agent answers its own command's
// prompts with ssh_send_input (issue 18): read -p, rm -i, a [Y/n]
// question, a Python REPL and a getpass password prompt, each first
// reported as waiting for input. A password is not audited.
func TestSendInputAnswersPrompts(t *testing.T) {
	aud := &memAudit{}
	f := newServerWith(t, 0, func(d *mcp.Deps) { d.Audit = aud })
	c := f.client(t)
	s := connect(t, c, "prompts")
	call := func(tool string, args map[string]any) map[string]any {
		args["sessionName"], args["sessionToken"] = s.Name, s.Token
		return c.Call(t, tool, args)
	}
	// waits runs cmd until it waits at its prompt.
	waits := func(cmd, prompt string) string {
		t.Helper()
		r := mcptest.WantError(t, call("ssh_exec", map[string]any{"command": cmd, "timeoutSeconds": 1}), "command_timeout")
		if r["waitingForInput"] != true || !strings.Contains(mcptest.Str(r["lastLine"]), prompt) {
			t.Fatalf("%s: not waiting at %q: %s", cmd, prompt, mcptest.Short(r))
		}
		return mcptest.Str(r["commandId"])
	}
	// answer sends input and wants the command's final result.
	answer := func(id, input string) map[string]any {
		t.Helper()
		r := mcptest.MustOK(t, call("ssh_send_input", map[string]any{"commandId": id, "input": input, "submit": true, "waitSeconds": 10}))
		if r["running"] != false {
			t.Fatalf("after %q: still running: %s", input, mcptest.Short(r))
		}
		return r
	}

	id := waits(`read -p 'Name? ' n; echo "hello $n"`, "Name? ")
	if res := mcptest.Result(t, answer(id, "bob")); res["stdout"] != "hello bob\n" || res["exitCode"] != 0.0 {
		t.Errorf("read -p: %v", res)
	}

	mcptest.MustOK(t, call("ssh_exec", map[string]any{"command": "touch victim"}))
	id = waits("rm -i victim", "remove")
	if res := mcptest.Result(t, answer(id, "y")); res["exitCode"] != 0.0 {
		t.Errorf("rm -i: %v", res)
	}
	if res := mcptest.Result(t, call("ssh_exec", map[string]any{"command": "test -e victim"})); res["exitCode"] != 1.0 {
		t.Errorf("rm -i did not remove: %v", res)
	}

	id = waits(`read -p 'Continue? [Y/n] ' a; [ "$a" = n ] && exit 1; echo yes`, "[Y/n]")
	if res := mcptest.Result(t, answer(id, "")); res["stdout"] != "yes\n" {
		t.Errorf("[Y/n]: %v", res)
	}

	// A REPL: a line, its answer, and the prompt again; then its end.
	id = waits("python3 -q -i", ">>>")
	r := mcptest.MustOK(t, call("ssh_send_input", map[string]any{"commandId": id, "input": "print(6*7)", "submit": true, "waitSeconds": 10}))
	if r["running"] != true || r["stdout"] != "42\n" || r["waitingForInput"] != true {
		t.Errorf("REPL line: %s", mcptest.Short(r))
	}
	answer(id, "exit()")

	// getpass reads /dev/tty, with echo off.
	id = waits(`python3 -c 'import getpass; p = getpass.getpass("Password: "); print(len(p))'`, "Password: ")
	r = answer(id, "hunter2-secret")
	if res := mcptest.Result(t, r); res["stdout"] != "14\n" || r["echoed"] != false {
		t.Errorf("getpass: %s", mcptest.Short(r))
	}
	aud.mu.Lock()
	for _, rec := range aud.recs {
		if strings.Contains(string(rec.Args), "hunter2") {
			t.Errorf("the password is in the audit: %s %s", rec.Tool, rec.Args)
		}
	}
	aud.mu.Unlock()

	// Refused: no running command, a finished one, another session's.
	done := mcptest.Str(mcptest.MustOK(t, call("ssh_exec", map[string]any{"command": "true"}))["commandId"])
	mcptest.WantError(t, call("ssh_send_input", map[string]any{"commandId": done, "input": "x"}), "no_command_running")
	mcptest.WantError(t, call("ssh_send_input", map[string]any{"commandId": "cmd_nope", "input": "x"}), "unknown_command")
	other := connect(t, c, "other")
	id = waits(`read -p 'Mine? ' x`, "Mine? ")
	r = c.Call(t, "ssh_send_input", map[string]any{"sessionName": other.Name, "sessionToken": other.Token, "commandId": id, "input": "x", "submit": true})
	mcptest.WantError(t, r, "unknown_command")
	mcptest.WantError(t, c.Call(t, "ssh_send_input", map[string]any{"sessionName": s.Name, "sessionToken": other.Token, "commandId": id, "input": "x"}), "invalid_session_token")
	answer(id, "mine")
}

// TestReadOutputWaits: ssh_read_output with waitSeconds returns as soon
// as there is output at the offset, or the command ends, so an agent
// follows a long command without polling blindly.
func TestReadOutputWaits(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "follow")
	read := func(args map[string]any) map[string]any {
		args["sessionName"], args["sessionToken"] = s.Name, s.Token
		return mcptest.MustOK(t, c.Call(t, "ssh_read_output", args))
	}
	r := mcptest.WantError(t, c.Call(t, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
		"command": "sleep 1; echo first; sleep 1; echo second", "timeoutSeconds": 0.2}), "command_timeout")
	id := r["commandId"]
	start := time.Now()
	got := read(map[string]any{"commandId": id, "waitSeconds": 20})
	if got["data"] != "first\n" || got["running"] != true || time.Since(start) > 10*time.Second {
		t.Fatalf("first wait: %s after %v", mcptest.Short(got), time.Since(start))
	}
	got = read(map[string]any{"commandId": id, "offset": got["totalBytes"], "waitSeconds": 20})
	if got["data"] != "second\n" {
		t.Fatalf("second wait: %s", mcptest.Short(got))
	}
	got = read(map[string]any{"commandId": id, "offset": got["totalBytes"], "waitSeconds": 20})
	if got["running"] != false || got["exitCode"] != 0.0 || got["eof"] != true || got["data"] != "" {
		t.Fatalf("wait for the end: %s", mcptest.Short(got))
	}
	// An ended command answers at once; a bad waitSeconds is refused.
	start = time.Now()
	read(map[string]any{"commandId": id, "offset": got["totalBytes"], "waitSeconds": 20})
	if time.Since(start) > 5*time.Second {
		t.Errorf("an ended command waited %v", time.Since(start))
	}
	mcptest.WantError(t, c.Call(t, "ssh_read_output", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "commandId": id, "waitSeconds": -1}), "invalid_arguments")
}

// TestFullScreenReported: a program on the alternate screen is reported
// as such on timeout, with its name, and ssh_cancel ends it, saying how.
func TestFullScreenReported(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "full")
	r := mcptest.WantError(t, c.Call(t, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
		"command": `python3 -c 'import sys, time; sys.stdout.write("\x1b[?1049hscreen"); sys.stdout.flush(); time.sleep(60)'`, "timeoutSeconds": 1}), "command_timeout")
	if r["fullScreen"] != true || r["program"] != "python3" {
		t.Errorf("full screen: %s", mcptest.Short(r))
	}
	cancel := mcptest.MustOK(t, c.Call(t, "ssh_cancel", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))
	res := mcptest.Result(t, cancel)
	if res["interruptedBy"] != "agent" || !strings.Contains(mcptest.Str(cancel["message"]), "status") {
		t.Errorf("cancel: %s", mcptest.Short(cancel))
	}
}
