package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
)

// human returns the session behind s, to type into as a viewer would.
func (f *fixture) human(t *testing.T, c *mcptest.Client, s mcptest.Session) *session.Session {
	t.Helper()
	url := mcptest.Str(mcptest.MustOK(t, c.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	if !ok {
		t.Fatal("no session for the monitoring key")
	}
	return sess
}

// typeKeys types keys as the viewer "alice", in browser-sized pieces.
func typeKeys(t *testing.T, sess *session.Session, keys string) {
	t.Helper()
	ctx := shell.WithViewer(context.Background(), "alice")
	for i := 0; i < len(keys); i += 8192 {
		if err := sess.Input(ctx, []byte(keys[i:min(len(keys), i+8192)])); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReply repeats call until its reply carries the error code, or fails.
func waitReply(t *testing.T, d time.Duration, code string, call func() map[string]any) map[string]any {
	t.Helper()
	var r map[string]any
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = call(); r["error"] == code {
			return r
		}
	}
	t.Fatalf("never got %s; last reply: %s", code, mcptest.Short(r))
	return nil
}

// TestGateLongHistoryWithinBudget: a human paste of 2,000 commands comes
// back in one gate reply that stays within the inline budget: the newest
// commands whole, older ones compact, the rest counted, and the whole
// history, in order, one ssh_read_output away (issue 18).
func TestGateLongHistoryWithinBudget(t *testing.T) {
	const n, budget = 2000, 32 << 10
	f := newServer(t, budget)
	c := f.client(t)
	s := connect(t, c, "paste")
	sess := f.human(t, c, s)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "echo line%d\r", i)
	}
	typeKeys(t, sess, b.String())
	// Once the paste has run (its last output, after its echo), the agent
	// calls: one report, or a few if the last commands were still being
	// filed, each within the budget, together every command in order.
	waitOutput(t, sess, fmt.Sprintf("line%d\r\n", n-1), 2)
	var all []map[string]any
	sawHistory := false
	for len(all) < n {
		g := waitReply(t, 10*time.Second, "user_activity_detected", func() map[string]any { return exec(t, c, s, "echo agent") })
		cmds, _ := g["userCommands"].([]any)
		raw, _ := json.Marshal(cmds)
		if len(raw) > budget {
			t.Errorf("userCommands is %d bytes of JSON, over the %d budget", len(raw), budget)
		}
		count := int(g["userCommandCount"].(float64))
		omitted, _ := g["userCommandsOmitted"].(float64)
		if len(cmds)+int(omitted) != count {
			t.Fatalf("%d listed + %v omitted, want %d", len(cmds), omitted, count)
		}
		if omitted == 0 {
			for _, x := range cmds {
				all = append(all, x.(map[string]any))
			}
			continue
		}
		sawHistory = true
		last := cmds[len(cmds)-1].(map[string]any)
		if !strings.HasPrefix(mcptest.Str(last["stdout"]), "line") || last["viewer"] != "alice" {
			t.Errorf("the newest command is not whole: %v", last)
		}
		// The whole report, in pages, from historyId.
		var text strings.Builder
		for off := 0; ; {
			r := mcptest.MustOK(t, c.Call(t, "ssh_read_output", map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
				"commandId": g["historyId"], "offset": off}))
			text.WriteString(mcptest.Str(r["data"]))
			if r["eof"] == true {
				break
			}
			off = int(r["offset"].(float64) + r["bytes"].(float64))
		}
		dec := json.NewDecoder(strings.NewReader(text.String()))
		var listed []map[string]any
		for dec.More() {
			var e map[string]any
			if err := dec.Decode(&e); err != nil {
				t.Fatal(err)
			}
			listed = append(listed, e)
		}
		if len(listed) != count {
			t.Fatalf("historyId lists %d commands, the report %d", len(listed), count)
		}
		for i, x := range cmds {
			if x.(map[string]any)["commandId"] != listed[int(omitted)+i]["commandId"] {
				t.Fatalf("listed command %d is not the history's %d", i, int(omitted)+i)
			}
		}
		all = append(all, listed...)
	}
	if !sawHistory || len(all) != n {
		t.Fatalf("%d commands reported (history used: %v), want %d", len(all), sawHistory, n)
	}
	for i, e := range all {
		if e["command"] != fmt.Sprintf("echo line%d", i) || e["exitCode"] != 0.0 || e["commandId"] == nil {
			t.Fatalf("command %d: %v", i, e)
		}
	}
	mustOK := mcptest.MustOK(t, exec(t, c, s, "echo after"))
	if mcptest.Result(t, mustOK)["stdout"] != "after\n" {
		t.Errorf("after the report: %v", mustOK)
	}
}

// TestHumanActionsReachTheAgent: what the human does that is not a plain
// command reaches the agent (issue 18): a Ctrl-C on the agent's command
// says who pressed it; a human's running command is named when busy, and
// readable; a half-typed line's message names what the agent can do; and
// a shell the human ended reports human_exit with the commands before it.
func TestHumanActionsReachTheAgent(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "hands")
	sess := f.human(t, c, s)

	// Ctrl-C on the agent's command.
	done := make(chan map[string]any, 1)
	go func() { done <- exec(t, c, s, "echo started; sleep 30") }()
	waitOutput(t, sess, "started", 1)
	typeKeys(t, sess, "\x03")
	res := mcptest.Result(t, mcptest.MustOK(t, <-done))
	if res["interruptedBy"] != "human" || res["interruptKey"] != "Ctrl-C" || res["interruptViewer"] != "alice" || res["exitCode"] != 130.0 {
		t.Errorf("interrupted by the human: %v", res)
	}

	// A human command that runs: named, with its id, and readable.
	typeKeys(t, sess, "echo h-out; sleep 2\r")
	b := waitReply(t, 10*time.Second, "session_busy", func() map[string]any { return exec(t, c, s, "true") })
	if b["reason"] != "human_command" || b["runningCommand"] != "echo h-out; sleep 2" || b["runningCommandId"] == nil || b["runningForMs"] == nil ||
		strings.Contains(mcptest.Str(b["message"]), "call ssh_cancel") {
		t.Errorf("busy with the human's command: %s", mcptest.Short(b))
	}
	r := mcptest.MustOK(t, c.Call(t, "ssh_read_output", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "commandId": b["runningCommandId"]}))
	if r["running"] != true {
		t.Errorf("the human's running command read back: %s", mcptest.Short(r))
	}
	g := waitReply(t, 10*time.Second, "user_activity_detected", func() map[string]any { return exec(t, c, s, "true") })
	if cmds := g["userCommands"].([]any); len(cmds) != 1 || cmds[0].(map[string]any)["commandId"] != b["runningCommandId"] {
		t.Errorf("gate after the human's command: %s", mcptest.Short(g))
	}

	// A half-typed line: wait or ask, never cancel.
	typeKeys(t, sess, "echo half")
	p := waitReply(t, 10*time.Second, "session_busy", func() map[string]any { return exec(t, c, s, "true") })
	if p["reason"] != "partial_line" || p["partialLine"] != "echo half" || strings.Contains(mcptest.Str(p["message"]), "call ssh_cancel") {
		t.Errorf("busy with a half-typed line: %s", mcptest.Short(p))
	}

	// The human finishes the line and ends the shell; the agent calls
	// once it is gone.
	typeKeys(t, sess, "\r")
	typeKeys(t, sess, "exit 3\r")
	for deadline := time.Now().Add(10 * time.Second); sess.Err() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the shell did not end")
		}
	}
	e := exec(t, c, s, "true")
	cmds, _ := e["userCommands"].([]any)
	if e["reason"] != "human_exit" || len(cmds) != 2 {
		t.Fatalf("the human ended the shell: %s", mcptest.Short(e))
	}
	if ex := cmds[1].(map[string]any); ex["command"] != "exit 3" || ex["exitCode"] != 3.0 {
		t.Errorf("the exit command: %v", ex)
	}
	// Told once: the next call only says the session ended.
	if again := exec(t, c, s, "true"); again["error"] != "session_ended" || again["userCommands"] != nil {
		t.Errorf("second call after the end: %s", mcptest.Short(again))
	}
}

// waitOutput waits until the session's terminal has shown s n times.
func waitOutput(t *testing.T, sess *session.Session, s string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var seen strings.Builder
	err := sess.Watch(ctx, func(p []byte) error {
		seen.Write(p)
		if strings.Count(seen.String(), s) >= n {
			cancel()
		}
		return nil
	})
	if err != nil || strings.Count(seen.String(), s) < n {
		t.Fatalf("the terminal never showed %q %d times: %v", s, n, err)
	}
}

// TestBackgroundOutputInItsOwnField: a background job's output comes in
// the next reply's background field, never in a command's stdout, and is
// readable back by its outputId.
func TestBackgroundOutputInItsOwnField(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "bg")
	mcptest.MustOK(t, exec(t, c, s, "(sleep 0.3; echo bg-line; echo bg-err >&2) &"))
	r := mcptest.MustOK(t, exec(t, c, s, "sleep 0.8; echo fg"))
	if res := mcptest.Result(t, r); res["stdout"] != "fg\n" {
		t.Errorf("the later command's output: %v", res)
	}
	bg, _ := r["background"].(map[string]any)
	if bg == nil || bg["stdout"] != "bg-line\n" || bg["stderr"] != "bg-err\n" || bg["outputId"] == nil {
		t.Fatalf("background field: %s", mcptest.Short(r))
	}
	back := mcptest.MustOK(t, c.Call(t, "ssh_read_output", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "commandId": bg["outputId"]}))
	if back["data"] != "bg-line\n" {
		t.Errorf("read back: %s", mcptest.Short(back))
	}
	if again := mcptest.MustOK(t, exec(t, c, s, "echo next")); again["background"] != nil {
		t.Errorf("reported twice: %s", mcptest.Short(again))
	}
}
