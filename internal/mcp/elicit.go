package mcp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/redact"
)

// approvalInput names the approval among a call's input requests
// (protocol 2026-07-28).
const approvalInput = "tandem.approval"

// approvalForm is what the agent's client shows its human: approve, deny
// with a reason, or approve and remember for some minutes.
var approvalForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{"type": "string", "title": "Decision", "enum": []string{"approve", "deny", "remember"},
			"description": "approve runs this one action once; deny refuses it; remember approves it and allows the identical action again in this session for the minutes below."},
		"reason":          map[string]any{"type": "string", "title": "Reason", "description": "Why, for the agent and the audit (optional)."},
		"rememberMinutes": map[string]any{"type": "integer", "title": "Remember for (minutes)", "minimum": 1, "default": 15},
	},
	"required": []string{"decision"},
}

// clientCanElicit says whether the calling client declared elicitation.
func clientCanElicit(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
}

// elicitMessage describes the action to the human in their client, with
// the session's secrets (red) redacted: the agent's client may show it to
// the agent as well. A nil red redacts nothing.
func elicitMessage(a approval.Approval, red *redact.Redactor) string {
	m := approvalText(a)
	if red != nil {
		m, _ = red.String(m)
	}
	return m
}

// approvalText describes the action, as it is.
func approvalText(a approval.Approval) string {
	act := a.Action
	var b strings.Builder
	if what, ok := heldWhat(a); ok {
		b.WriteString(what)
	} else {
		fmt.Fprintf(&b, "tandem: the agent asks to run %s in session %q", act.Tool, act.SessionName)
		if act.Target != "" {
			fmt.Fprintf(&b, " on target %q", act.Target)
		}
		if act.Command != "" {
			fmt.Fprintf(&b, ":\n\n%s\n\nin %s", act.Command, act.Cwd)
		}
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, "\n\nThe policy asks because %s.", strings.TrimSuffix(a.Reason, "."))
	}
	fmt.Fprintf(&b, "\n\nApproval %s expires at %s.", a.ID, a.Expires.UTC().Format(time.RFC3339))
	return b.String()
}

// clientDecision turns the client's answer into a decision; ok is false
// when the human dismissed the form without choosing.
func clientDecision(res *mcp.ElicitResult) (d approval.Decision, ok bool) {
	d = approval.Decision{By: approval.ByClient, Approver: "client"}
	switch res.Action {
	case "decline":
		d.Reason = "declined in the agent's client"
		return d, true
	case "accept":
	default:
		return d, false
	}
	reason, _ := res.Content["reason"].(string)
	d.Reason = strings.TrimSpace(reason)
	switch res.Content["decision"] {
	case "approve":
		d.Approved = true
	case "remember":
		d.Approved = true
		mins := 15.0
		if m, ok := res.Content["rememberMinutes"].(float64); ok && m >= 1 {
			mins = m
		}
		d.Remember = time.Duration(mins * float64(time.Minute))
	default: // "deny", or nothing chosen
		if d.Reason == "" {
			d.Reason = "denied in the agent's client"
		}
	}
	return d, true
}

// askClient asks the client's human, by a server request, while the call
// also waits for the dashboard; the first answer wins. It returns at once;
// the elicitation ends when ctx does.
func (s *Server) askClient(ctx context.Context, ss *mcp.ServerSession, a approval.Approval, red *redact.Redactor) {
	go func() {
		res, err := ss.Elicit(ctx, &mcp.ElicitParams{Mode: "form", Message: elicitMessage(a, red), RequestedSchema: approvalForm})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("the client did not answer the approval form; waiting for the dashboard", "approval", a.ID, "err", err)
			}
			return
		}
		d, ok := clientDecision(res)
		if !ok {
			return
		}
		if _, err := s.deps.Approvals.Decide(context.WithoutCancel(ctx), a.ID, d); err != nil {
			s.log.Debug("the client's answer came after another", "approval", a.ID, "err", err)
		}
	}()
}
