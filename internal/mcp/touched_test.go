package mcp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/shell"
)

// TestTouchReplies: a viewer's keys in the agent's running command and
// their Ctrl-C come on the next reply that names the session, whatever the
// tool (ssh_read_output too), once, in the shape the tools' closed output
// schemas describe; the read-back of an interrupted command names the
// human who interrupted it.
func TestTouchReplies(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	valid := schemas(t, c)
	call := func(tool string, args map[string]any) map[string]any {
		t.Helper()
		r := c.Call(t, tool, args)
		valid(tool, r)
		return r
	}
	conn := mcptest.MustOK(t, call("ssh_connect", map[string]any{"name": "touch"}))
	tok := mcptest.Str(conn["sessionToken"])
	args := func(extra map[string]any) map[string]any {
		extra["sessionName"], extra["sessionToken"] = "touch", tok
		return extra
	}
	url := mcptest.Str(conn["monitoringUrl"])
	sess, _ := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	bob := shell.WithViewer(context.Background(), "bob 127.0.0.1:1")
	touches := func(r map[string]any) []any {
		t.Helper()
		list, _ := r["agentCommandTouched"].([]any)
		if len(list) > 0 && mcptest.Str(r["agentCommandTouchedHint"]) == "" {
			t.Errorf("no hint with the touches: %v", r)
		}
		return list
	}

	// An answer at the prompt, told on the read that follows the command.
	id := mcptest.Str(mcptest.WantError(t, call("ssh_exec", args(map[string]any{"command": `read -r -p 'Go? ' x; echo "x=$x"`, "timeoutSeconds": 0.5})), "command_timeout")["commandId"])
	if err := sess.Input(bob, []byte("yes\r")); err != nil {
		t.Fatal(err)
	}
	r := mcptest.MustOK(t, call("ssh_read_output", args(map[string]any{"commandId": id, "waitSeconds": 10})))
	told := touches(r) // the first reply after the keys
	for r["running"] == true {
		r = mcptest.MustOK(t, call("ssh_read_output", args(map[string]any{"commandId": id, "waitSeconds": 10})))
		told = append(told, touches(r)...)
	}
	if r["data"] != "x=yes\n" || r["interruptedBy"] != nil {
		t.Errorf("read-back: %v", r)
	}
	if len(told) != 1 {
		t.Fatalf("the answer was told %d times: %v", len(told), told)
	}
	if touch := told[0].(map[string]any); touch["commandId"] != id || touch["by"] != "human" || touch["keys"] != 4.0 || touch["enters"] != 1.0 || touch["interruptKey"] != nil {
		t.Errorf("the answer: %v", touch)
	}

	// Ctrl-C on a running command, told on the next call whatever it is.
	id = mcptest.Str(mcptest.WantError(t, call("ssh_exec", args(map[string]any{"command": "sleep 30", "timeoutSeconds": 0.3})), "command_timeout")["commandId"])
	if err := sess.Input(bob, []byte{3}); err != nil {
		t.Fatal(err)
	}
	told = nil
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = call("ssh_get_monitoring_url", args(map[string]any{}))
		told = append(told, touches(r)...)
		back := mcptest.MustOK(t, call("ssh_read_output", args(map[string]any{"commandId": id})))
		told = append(told, touches(back)...)
		if back["running"] == false {
			if back["interruptedBy"] != "human" || back["interruptKey"] != "Ctrl-C" || back["interruptViewer"] != "bob 127.0.0.1:1" || back["exitCode"] != 130.0 {
				t.Errorf("read-back of the interrupted command: %v", back)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never ended: %v", back)
		}
	}
	r = mcptest.MustOK(t, call("ssh_exec", args(map[string]any{"command": "true"})))
	told = append(told, touches(r)...)
	if len(told) != 1 {
		t.Fatalf("the Ctrl-C was told %d times: %v", len(told), told)
	}
	touch := told[0].(map[string]any)
	if touch["commandId"] != id || touch["interruptedBy"] != "human" || touch["interruptKey"] != "Ctrl-C" || touch["keys"] != 1.0 || touch["viewer"] != "bob 127.0.0.1:1" {
		t.Errorf("the Ctrl-C: %v", touch)
	}
}
