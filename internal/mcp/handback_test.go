package mcp_test

import (
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// TestRequestHuman: the agent asks for the human. The call answers
// human_pending with a requestId; meanwhile the agent's actions answer
// session_busy (human_requested) and ssh_list_sessions names the request;
// the human's commands wait for the hand-back, whose reply carries them
// with the note, once.
func TestRequestHuman(t *testing.T) {
	f := newServer(t, 32<<10)
	c := f.client(t)
	s := connect(t, c, "hand")
	sess := f.human(t, c, s)
	call := func(args map[string]any) map[string]any {
		args["sessionName"], args["sessionToken"] = s.Name, s.Token
		return c.Call(t, "ssh_request_human", args)
	}

	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{}, "message"},
		{map[string]any{"message": "   "}, "message"},
		{map[string]any{"message": string(make([]byte, 3000))}, "message"},
		{map[string]any{"message": "x", "waitSeconds": 51}, "waitSeconds"},
		{map[string]any{"message": "x", "waitSeconds": -1}, "waitSeconds"},
		{map[string]any{"requestId": "hr_nothing"}, "requestId"},
	} {
		r := mcptest.WantError(t, call(tc.args), "invalid_arguments")
		if r["field"] != tc.field {
			t.Errorf("%v: field %v, want %s", tc.args, r["field"], tc.field)
		}
	}

	p := mcptest.WantError(t, call(map[string]any{"message": "Enter the sudo password", "waitSeconds": 0}), "human_pending")
	id := mcptest.Str(p["requestId"])
	if id == "" || p["requestedAt"] == nil {
		t.Fatalf("human_pending: %v", mcptest.Short(p))
	}
	b := mcptest.WantError(t, exec(t, c, s, "echo agent"), "session_busy")
	if b["reason"] != "human_requested" || b["requestId"] != id {
		t.Fatalf("exec while the human holds the session: %v", mcptest.Short(b))
	}
	mcptest.WantError(t, c.Call(t, "ssh_disconnect", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}), "session_busy")
	l := mcptest.MustOK(t, c.Call(t, "ssh_list_sessions", map[string]any{}))
	hr, _ := l["sessions"].([]any)[0].(map[string]any)["humanRequest"].(map[string]any)
	if hr["requestId"] != id || hr["message"] != "Enter the sudo password" {
		t.Fatalf("ssh_list_sessions: %v", mcptest.Short(l))
	}
	// Asking again while one is open waits on the same request.
	if r := mcptest.WantError(t, call(map[string]any{"message": "again", "waitSeconds": 0}), "human_pending"); r["requestId"] != id {
		t.Fatalf("a second request: %v", mcptest.Short(r))
	}

	typeKeys(t, sess, "echo one\r")
	typeKeys(t, sess, "echo two\r")
	deadline := time.Now().Add(10 * time.Second)
	for i := sess.Info(); i.Last == nil || i.Last.Command != "echo two" || i.Last.Running; i = sess.Info() {
		if time.Now().After(deadline) {
			t.Fatal("the human's commands did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = sess.HandBack(id, "password entered", "alice")
	}()
	r := mcptest.MustOK(t, call(map[string]any{"requestId": id, "waitSeconds": 20}))
	if r["note"] != "password entered" || r["handedBackBy"] != "alice" || r["userCommandCount"] != 2.0 {
		t.Fatalf("the hand-back: %v", mcptest.Short(r))
	}
	cmds, _ := r["userCommands"].([]any)
	if len(cmds) != 2 || cmds[0].(map[string]any)["command"] != "echo one" || cmds[1].(map[string]any)["stdout"] != "two\n" {
		t.Fatalf("the human's commands: %v", mcptest.Short(r))
	}
	if res := mcptest.MustOK(t, exec(t, c, s, "echo agent")); res["result"].(map[string]any)["stdout"] != "agent\n" {
		t.Fatalf("after the hand-back: %v", mcptest.Short(res))
	}
	mcptest.WantError(t, call(map[string]any{"requestId": id}), "invalid_arguments")
}
