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
