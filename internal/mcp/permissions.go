package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/session"
)

// permissionsTool is Claude Code's --permission-prompt-tool: Claude Code
// asks it before each of its own tool uses, and tandem's policy answers.
const permissionsTool = "permissions__approve"

type approveArgs struct {
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// claudeCommandTool is the Claude Code tool whose input is a shell
// command, which the policy parses and judges like ssh_exec's.
const claudeCommandTool = "Bash"

// approvePermission decides one Claude Code tool use with the same engine,
// pending approvals, dashboard and elicitation as tandem's own tools. The
// reply is exactly Claude Code's shape, one text content:
// {"behavior":"allow","updatedInput":…} or {"behavior":"deny","message":…}.
func (s *Server) approvePermission(ctx context.Context, c session.Caller, a approveArgs) (reply, error) {
	if err := require("tool_name", a.ToolName); err != nil {
		return nil, err
	}
	input := bytes.TrimSpace(a.Input)
	if len(input) == 0 || bytes.Equal(input, []byte("null")) {
		input = []byte("{}")
	}
	if input[0] != '{' {
		return nil, invalidArg("input", "must be the tool's input object")
	}
	act := approval.Action{Tenant: c.Tenant, Actor: c.Actor, SessionID: "claude:" + c.Actor + "/" + c.ID, Tool: a.ToolName}
	if a.ToolName == claudeCommandTool {
		// Judged is exactly the key echoed in updatedInput, which Claude
		// Code runs: "command", spelled so. decodeArgs has refused keys
		// that collide under case folding, or come twice, at any depth.
		var in map[string]json.RawMessage
		if err := json.Unmarshal(input, &in); err != nil {
			return nil, invalidArg("input", "is not valid JSON: %v", err)
		}
		raw, ok := in["command"]
		if !ok || json.Unmarshal(raw, &act.Command) != nil {
			return nil, invalidArg("input.command", "must be the Bash command, a JSON string")
		}
	} else {
		// The approval binds to the exact input: another file, another edit.
		var compact bytes.Buffer
		if err := json.Compact(&compact, input); err != nil {
			return nil, invalidArg("input", "is not valid JSON: %v", err)
		}
		act.Command = compact.String()
	}
	info := callFrom(ctx)
	err := s.authorize(ctx, c, a.ToolName, "", act)
	var f *failure
	switch {
	case err == nil:
		b, _ := json.Marshal(struct {
			Behavior     string          `json:"behavior"`
			UpdatedInput json.RawMessage `json:"updatedInput"`
		}{"allow", json.RawMessage(input)})
		info.raw = claudeReply(b)
		return ok(reply{"behavior": "allow"}), nil
	case errors.As(err, &f):
		info.raw = claudeDeny(f.msg)
		return nil, f
	}
	return nil, err
}

// claudeDeny is Claude Code's deny shape: {"behavior":"deny","message":…}.
func claudeDeny(msg string) *mcp.CallToolResult {
	b, _ := json.Marshal(struct {
		Behavior string `json:"behavior"`
		Message  string `json:"message"`
	}{"deny", msg})
	return claudeReply(b)
}

// claudeFailure answers a call that failed before it was judged (its
// arguments refused, its claim missing) in Claude Code's deny shape, the
// only one it reads, with tandem's error code leading the message.
func claudeFailure(r reply) *mcp.CallToolResult {
	code, _ := r["error"].(string)
	msg, _ := r["message"].(string)
	return claudeDeny(code + ": " + msg)
}

// claudeReply is a result holding one text content and nothing else.
func claudeReply(b []byte) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}
