package mcp

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/session"
)

// Judge decides what one policy allows; *policy.Policy implements it.
type Judge interface {
	Decide(in policy.Input) policy.Verdict
}

// Policy is one target's policy as the server applies it.
type Policy struct {
	// Judge decides; nil allows everything.
	Judge Judge
	// AskClient lets the agent's client answer an ask by elicitation,
	// where the client declared it: approvers include "client".
	AskClient bool
}

// The error codes of policy and approvals.
const (
	codePolicyDenied    = "policy_denied"
	codeApprovalPending = "approval_pending"
	codeApprovalDenied  = "approval_denied"
	codeApprovalTimeout = "approval_timeout"
)

// readOnly says whether a tool only reads: such tools work in every
// policy mode and never wait for a human.
func readOnly(tool string) bool {
	switch tool {
	case "ssh_list_sessions", "ssh_read_output", "ssh_get_monitoring_url":
		return true
	}
	return false
}

// commandTool says whether a tool's action is a shell command, which the
// policy parses and judges.
func commandTool(tool string) bool { return tool == "ssh_exec" }

// authorize asks the policy whether the call's action may happen, and
// when it says ask, asks a human through the broker. It returns nil when
// the action may run now, with the approval id (if one was needed) noted
// on the call for the reply and the audit. It runs before anything
// touches the shell: a refused command is never typed.
func (s *Server) authorize(ctx context.Context, c session.Caller, tool, targetName string, act approval.Action) error {
	if readOnly(tool) || s.deps.Policy == nil {
		return nil
	}
	pol := s.deps.Policy(c.Tenant, targetName)
	if pol.Judge == nil {
		return nil
	}
	v := pol.Judge.Decide(policy.Input{Tool: tool, Command: act.Command, HasCommand: commandTool(tool)})
	info := callFrom(ctx)
	info.rule = v.Rule
	what := "the call " + tool
	if commandTool(tool) {
		what = fmt.Sprintf("the command %q", act.Command)
	}
	switch v.Decision {
	case policy.Allow:
		return nil
	case policy.Deny:
		return fail(codePolicyDenied, fmt.Sprintf("The policy does not allow %s: %s. Nothing was run. Do not retry it as is; find another way, or ask the operator.", what, v.Reason),
			reply{"rule": v.Rule})
	case policy.Forward:
		// Forwarding to an upstream approver is not built yet; config
		// validation refuses it, so only a hand-built policy lands here.
		return fail(codePolicyDenied, fmt.Sprintf("The policy forwards %s to an upstream approver, which this tandem cannot reach. Nothing was run.", what),
			reply{"rule": v.Rule})
	}
	b := s.deps.Approvals
	if b == nil {
		return fail(codePolicyDenied, fmt.Sprintf("The policy asks a human to approve %s, but this tandem has no approver to ask. Nothing was run.", what),
			reply{"rule": v.Rule})
	}
	prog := startProgress(ctx, s.heartbeat())
	defer prog.finish()
	var onWait func(time.Duration)
	if prog != nil {
		sent := time.Duration(0)
		onWait = func(waited time.Duration) {
			if waited-sent < s.heartbeat() {
				return
			}
			sent = waited
			prog.note(ctx, fmt.Sprintf("waiting %.0f s for a human to approve %s", waited.Seconds(), what))
		}
	}
	hooks := approval.Hooks{OnWait: onWait}
	var ss *mcp.ServerSession
	var input *mcp.ElicitResult
	if info.req != nil {
		ss = info.req.Session
		if info.req.Params != nil {
			input, _ = info.req.Params.InputResponses[approvalInput].(*mcp.ElicitResult)
		}
	}
	askForm := false
	if pol.AskClient && clientCanElicit(ss) {
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		switch {
		case !multiRoundTrip(ss):
			hooks.OnPending = func(a approval.Approval) { s.askClient(ectx, ss, a) }
		case input != nil:
			// The client repeated the call with its human's answer.
			hooks.OnPending = func(a approval.Approval) {
				if d, ok := clientDecision(input); ok {
					_, _ = b.Decide(ctx, a.ID, d)
				}
			}
		default:
			// 2026-07-28: the answer comes back with the repeated call.
			askForm, hooks.Wait = true, time.Nanosecond
		}
	}
	out, err := b.Ask(ctx, act, v.Rule, v.Reason, hooks)
	if err != nil {
		return err
	}
	if askForm && out.Kind == approval.Waiting {
		info.approvalID = out.Approval.ID
		info.input = mcp.InputRequestMap{approvalInput: &mcp.ElicitParams{Mode: "form",
			Message: elicitMessage(out.Approval), RequestedSchema: approvalForm}}
	}
	a := out.Approval
	switch out.Kind {
	case approval.Run:
		info.approvalID = a.ID
		return nil
	case approval.Refused:
		why := "no reason given"
		if a.Decision != nil && a.Decision.Reason != "" {
			why = a.Decision.Reason
		}
		by := ""
		if a.Decision != nil {
			by = a.Decision.By
		}
		info.approvalID = a.ID
		return fail(codeApprovalDenied, fmt.Sprintf("A human denied %s (%s). Nothing was run. Do not repeat it; take the reason into account.", what, why),
			reply{"approvalId": a.ID, "reason": why, "decidedBy": by, "rule": v.Rule})
	case approval.TimedOut:
		info.approvalID = a.ID
		return fail(codeApprovalTimeout, fmt.Sprintf("Nobody approved %s before the approval expired, so it was denied. Nothing was run. Call again to ask again.", what),
			reply{"approvalId": a.ID, "rule": v.Rule})
	}
	info.approvalID = a.ID
	return fail(codeApprovalPending, fmt.Sprintf("%s waits for a human's approval (%s). Nothing was run yet. Repeat the identical call to pick up the answer; it stays open until %s.",
		upperFirst(what), a.ID, a.Expires.UTC().Format(time.RFC3339)),
		reply{"approvalId": a.ID, "expiresAt": a.Expires.UTC().Format(time.RFC3339Nano), "rule": v.Rule})
}

func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// note sends one progress message now, with nothing else pending.
func (p *progress) note(ctx context.Context, msg string) {
	p.mu.Lock()
	p.last = time.Now()
	p.mu.Unlock()
	_ = p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token,
		Progress: float64(time.Since(p.start).Milliseconds()) / 1000, Message: msg})
}

// sessionAction is the action of a call on an existing session.
func sessionAction(c session.Caller, sess *session.Session, tool, command string) approval.Action {
	a := approval.Action{Tenant: c.Tenant, Actor: c.Actor, SessionID: sess.ID, SessionName: sess.Name,
		Target: sess.Target.Name, Tool: tool, Command: command}
	if commandTool(tool) {
		a.Cwd = sess.Info().Cwd
	}
	return a
}
