package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/policy"
)

// approveTool calls permissions__approve as Claude Code does and returns
// its one text content, checked to be the only content.
func approveTool(t *testing.T, c *mcptest.Client, tool string, input string) string {
	t.Helper()
	res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "permissions__approve",
		Arguments: map[string]any{"tool_name": tool, "input": json.RawMessage(input), "tool_use_id": "toolu_01"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.StructuredContent != nil {
		t.Fatalf("want exactly one text content and nothing else: %+v", res)
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content is %T", res.Content[0])
	}
	return tc.Text
}

// wantDeny checks the deny shape: exactly behavior and message.
func wantDeny(t *testing.T, text, msgPart string) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("%v: %s", err, text)
	}
	msg, _ := got["message"].(string)
	if len(got) != 2 || got["behavior"] != "deny" || !strings.Contains(msg, msgPart) {
		t.Fatalf("want {behavior: deny, message: …%s…}, got %s", msgPart, text)
	}
}

// TestPermissionsApprove: Claude Code's permission prompt tool answers in
// Claude Code's exact shapes, from the same engine and approvals.
func TestPermissionsApprove(t *testing.T) {
	rules := []policy.RuleSpec{
		{Tool: "Bash", Command: "git status", Decision: "allow"},
		{Command: "rm -rf *", Decision: "deny"},
		{Tool: "Read", Decision: "allow"},
		{Tool: "WebFetch", Decision: "deny"},
	}
	f, b := withPolicy(t, "ask", rules, approval.Options{Wait: 10 * time.Second})
	c := f.client(t)

	// Allow: updatedInput is the input, byte for byte, whatever it holds.
	in := `{"command":"git status","description":"Show the tree's state","timeout":120000}`
	if got, want := approveTool(t, c, "Bash", in), `{"behavior":"allow","updatedInput":`+in+`}`; got != want {
		t.Errorf("allow:\n got %s\nwant %s", got, want)
	}
	if got := approveTool(t, c, "Read", `{"file_path":"/etc/hosts"}`); got != `{"behavior":"allow","updatedInput":{"file_path":"/etc/hosts"}}` {
		t.Errorf("tool rule allow: %s", got)
	}
	// Deny, by a command rule through a wrapper, and by a tool rule.
	wantDeny(t, approveTool(t, c, "Bash", `{"command":"git status && sudo rm -rf /tmp/x"}`), "policy does not allow")
	wantDeny(t, approveTool(t, c, "WebFetch", `{"url":"https://example.com"}`), "policy does not allow")

	// Ask, approved at the dashboard: allow, with the input.
	answer(t, b, approval.Decision{Approved: true, By: approval.ByDashboard})
	in = `{"file_path":"/srv/app/main.go","old_string":"a","new_string":"b"}`
	if got, want := approveTool(t, c, "Edit", in), `{"behavior":"allow","updatedInput":`+in+`}`; got != want {
		t.Errorf("approved ask:\n got %s\nwant %s", got, want)
	}
	// Ask, denied: deny, with the approver's reason.
	answer(t, b, approval.Decision{Approved: false, By: approval.ByDashboard, Reason: "not that file"})
	wantDeny(t, approveTool(t, c, "Edit", `{"file_path":"/etc/passwd","old_string":"x","new_string":"y"}`), "not that file")

	// An approval runs once: the identical tool use asks again.
	answer(t, b, approval.Decision{Approved: false, By: approval.ByDashboard, Reason: "second edit"})
	wantDeny(t, approveTool(t, c, "Edit", in), "second edit")
}

// TestPermissionsApproveKeyCollisions: input whose keys collide under case
// folding, or come twice, is refused in Claude Code's deny shape, and
// nothing is asked; only the exact key "command" is judged, the one that
// updatedInput echoes.
func TestPermissionsApproveKeyCollisions(t *testing.T) {
	rules := []policy.RuleSpec{
		{Tool: "Bash", Command: "git status", Decision: "allow"},
		{Tool: "Read", Decision: "allow"},
	}
	f, b := withPolicy(t, "ask", rules, approval.Options{Wait: 10 * time.Second})
	c := f.client(t)
	for _, tc := range []struct {
		name, tool, input, want string
	}{
		{"case fold", "Bash", `{"command":"rm -rf ~/x","Command":"git status"}`, `input.Command`},
		{"case fold, other order", "Bash", `{"Command":"git status","command":"rm -rf ~/x"}`, `input.command`},
		{"long s folds to s", "Bash", "{\"command\":\"git status\",\"description\":\"a\",\"de\u017fcription\":\"b\"}", "collides"},
		{"kelvin folds to k", "Read", "{\"k\":1,\"\u212a\":2}", "collides"},
		{"duplicate", "Bash", `{"command":"git status","command":"rm -rf ~/x"}`, "more than once"},
		{"escaped duplicate", "Bash", `{"command":"git status","\u0063ommand":"rm -rf ~/x"}`, "more than once"},
		{"nested duplicate", "Read", `{"file_path":"/etc/hosts","opts":{"a":1,"a":2}}`, "input.opts.a"},
		{"duplicate in an array", "Read", `{"file_path":"/etc/hosts","x":[{"b":1,"B":2}]}`, "input.x[0].B"},
		{"only another case", "Bash", `{"Command":"rm -rf ~/x"}`, "input.command"},
		{"command not a string", "Bash", `{"command":["rm","-rf","~/x"]}`, "input.command"},
		{"no command", "Bash", `{"description":"git status"}`, "input.command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := approveTool(t, c, tc.tool, tc.input)
			wantDeny(t, got, "invalid_arguments")
			wantDeny(t, got, tc.want)
		})
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("refused input still asked a human: %+v", p)
	}
	// The same keys, once each and exactly spelled, are judged as before.
	in := `{"command":"git status","description":"x"}`
	if got := approveTool(t, c, "Bash", in); got != `{"behavior":"allow","updatedInput":`+in+`}` {
		t.Errorf("clean input: %s", got)
	}
}

// TestPermissionsApproveMalformed: arguments that are not JSON, or lack
// tool_name, are refused in Claude Code's deny shape too.
func TestPermissionsApproveMalformed(t *testing.T) {
	f, _ := withPolicy(t, "ask", nil, approval.Options{Wait: time.Second})
	c := f.client(t)
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"no tool_name", map[string]any{"input": map[string]any{}}, `"tool_name" is required`},
		{"input not an object", map[string]any{"tool_name": "Bash", "input": "rm -rf /"}, `"input"`},
		{"unknown argument", map[string]any{"tool_name": "Bash", "input": map[string]any{"command": "ls"}, "Tool_name": "Read"}, "Tool_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "permissions__approve", Arguments: tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.StructuredContent != nil {
				t.Fatalf("want exactly one text content: %+v", res)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			wantDeny(t, text, "invalid_arguments")
			wantDeny(t, text, tc.want)
		})
	}
}
