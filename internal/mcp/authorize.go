package mcp

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/session"
)

// Judge decides what one policy allows; *policy.Policy implements it.
type Judge interface {
	Decide(in policy.Input) policy.Verdict
}

// Upstream is an approver a policy forwards to; *forward.Client
// implements it.
type Upstream interface {
	Ask(ctx context.Context, r forward.Request, wait time.Duration) (forward.Answer, error)
}

// Policy is one target's policy as the server applies it.
type Policy struct {
	// Upstream answers the forward decision; nil refuses it.
	Upstream Upstream
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
func commandTool(tool string) bool { return tool == "ssh_exec" || tool == claudeCommandTool }

// authorize asks the policy whether the call's action may happen, and
// when it says ask, asks a human through the broker. It returns nil when
// the action may run now, with the approval id (if one was needed) noted
// on the call for the reply and the audit. It runs before anything
// touches the shell: a refused command is never typed.
func (s *Server) authorize(ctx context.Context, c session.Caller, tool, targetName string, act approval.Action) error {
	return s.authorizeJudged(ctx, c, tool, targetName, act, false)
}

// authorizeJudged is authorize for a session whose every program is
// judged as it starts (execJudged): a line that hides only which programs
// it runs need not ask there (policy.Input.ExecJudged).
func (s *Server) authorizeJudged(ctx context.Context, c session.Caller, tool, targetName string, act approval.Action, execJudged bool) error {
	return s.authorizeInput(ctx, c, targetName, act, policy.Input{Tool: tool, Command: act.Command, HasCommand: commandTool(tool), ExecJudged: execJudged})
}

// authorizeInput is authorize with the policy's input made by the caller:
// a file tool's path (transfer.go).
func (s *Server) authorizeInput(ctx context.Context, c session.Caller, targetName string, act approval.Action, in policy.Input) error {
	tool := in.Tool
	if readOnly(tool) || s.deps.Policy == nil {
		return nil
	}
	pol := s.deps.Policy(c.Tenant, targetName)
	if pol.Judge == nil {
		return nil
	}
	v := pol.Judge.Decide(in)
	info := callFrom(ctx)
	info.rule = v.Rule
	what := "the call " + tool
	switch {
	case commandTool(tool):
		what = fmt.Sprintf("the command %q", act.Command)
	case in.HasPath:
		what = fmt.Sprintf("%s of %q", tool, in.Path)
	}
	switch v.Decision {
	case policy.Allow:
		return nil
	case policy.Deny:
		if s.deps.Denied != nil {
			s.deps.Denied(act, v.Rule)
		}
		return fail(codePolicyDenied, fmt.Sprintf("The policy does not allow %s: %s. Nothing was run. Do not retry it as is; find another way, or ask the operator.", what, v.Reason),
			reply{"rule": v.Rule})
	case policy.Forward:
		if pol.Upstream == nil {
			return fail(codePolicyDenied, fmt.Sprintf("The policy forwards %s to an upstream approver, but none is configured. Nothing was run.", what),
				reply{"rule": v.Rule})
		}
	}
	b := s.deps.Approvals
	if b == nil {
		return fail(codePolicyDenied, fmt.Sprintf("The policy asks a human to approve %s, but this tandem has no approver to ask. Nothing was run.", what),
			reply{"rule": v.Rule})
	}
	prog := startProgress(ctx, s.heartbeat())
	defer prog.finish()
	onWait := prog.waitNotes(ctx, s.heartbeat(), "for a human to approve "+info.redactText(what))
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
	if v.Decision == policy.Forward {
		// The upstream decides; this tandem's own dashboard may still
		// answer first.
		wait := b.Options().Wait
		hooks.OnPending = func(a approval.Approval) { go s.forwardUp(ctx, pol.Upstream, a, wait) }
	} else if pol.AskClient && clientCanElicit(ss) {
		ectx, cancel := context.WithCancel(ctx)
		defer cancel()
		switch {
		case !multiRoundTrip(ss):
			hooks.OnPending = func(a approval.Approval) { s.askClient(ectx, ss, a, info.redact) }
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
			Message: elicitMessage(out.Approval, info.redact), RequestedSchema: approvalForm}}
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
	r := reply{"approvalId": a.ID, "expiresAt": a.Expires.UTC().Format(time.RFC3339Nano), "rule": v.Rule}
	bound := ""
	if a.Action.Cwd != "" {
		// An approval binds to the directory: say so before the agent
		// repeats the call from another one and is asked again.
		r["approvalCwd"] = a.Action.Cwd
		bound = fmt.Sprintf(" The approval is bound to the directory %s: from another directory the same command asks again.", a.Action.Cwd)
	}
	return fail(codeApprovalPending, fmt.Sprintf("%s waits for a human's approval (%s). Nothing was run yet. Repeat the identical call to pick up the answer; it stays open until %s.%s",
		upperFirst(what), a.ID, a.Expires.UTC().Format(time.RFC3339), bound), r)
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

// knownTenant says whether this tandem serves tenant.
func (s *Server) knownTenant(tenant string) bool {
	if s.deps.KnownTenant != nil {
		return s.deps.KnownTenant(tenant)
	}
	return tenant == s.deps.Tenant
}

// forwardUp asks the upstream about a pending approval and records its
// answer here. An upstream that cannot be reached denies, saying so;
// pending leaves the approval open for the agent's repeat, and is
// reported.
func (s *Server) forwardUp(ctx context.Context, up Upstream, a approval.Approval, wait time.Duration) (pending bool) {
	ans, err := up.Ask(ctx, forward.Request{Approval: a.Request}, max(wait-time.Second, time.Second))
	d := approval.Decision{By: approval.ByUpstream, Approver: ans.DecidedBy, Reason: ans.Message}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return false // the call is gone; its repeat asks again
		}
		s.log.Warn("the upstream approver gave no answer; denying", "approval", a.ID, "err", err)
		d.Reason = "the upstream approver could not be reached (" + err.Error() + ")"
	case ans.Behavior == forward.Allow:
		d.Approved = true
	case ans.Behavior == forward.Deny:
		if d.Reason == "" {
			d.Reason = "denied upstream"
		}
	default: // pending upstream
		return true
	}
	if _, err := s.deps.Approvals.Decide(context.WithoutCancel(ctx), a.ID, d); err != nil {
		s.log.Debug("the upstream's answer came after another", "approval", a.ID, "err", err)
	}
	return false
}

// Forwarded decides an approval a downstream tandem forwarded here, by
// this tandem's own policy for the action's tenant and target, and its
// own approvers: so chains of tandems end at a human's dashboard. It
// decides only for a tenant this tandem serves, and only for the tenant
// of the forwarder's claim (the operator token answers for all): any
// other is denied, never allowed.
func (s *Server) Forwarded(ctx context.Context, from forward.Forwarder, r forward.Request) forward.Answer {
	act := r.Approval.Action
	switch {
	case from.Tenant != "" && act.Tenant != from.Tenant:
		s.log.Warn("refused a forwarded approval of another tenant", "claimTenant", from.Tenant, "actionTenant", act.Tenant, "by", from.Name)
		return forward.Answer{Behavior: forward.Deny, DecidedBy: "rule",
			Message: fmt.Sprintf("the forwarder's claim is for tenant %q; it cannot have actions of tenant %q decided here", from.Tenant, act.Tenant)}
	case !s.knownTenant(act.Tenant):
		return forward.Answer{Behavior: forward.Deny, DecidedBy: "rule",
			Message: fmt.Sprintf("the upstream tandem serves no tenant %q", act.Tenant)}
	}
	// A forwarded action is bound apart from this tandem's own sessions:
	// whoever forwards can never pick up, or use up, an approval that one
	// of them waits for.
	act.SessionID = "forwarded:" + act.SessionID
	if s.deps.Policy == nil {
		return forward.Answer{Behavior: forward.Allow, DecidedBy: "rule"}
	}
	pol := s.deps.Policy(act.Tenant, act.Target)
	if pol.Judge == nil {
		return forward.Answer{Behavior: forward.Allow, DecidedBy: "rule"}
	}
	v := pol.Judge.Decide(policy.Input{Tool: act.Tool, Command: act.Command, HasCommand: commandTool(act.Tool)})
	switch v.Decision {
	case policy.Allow:
		return forward.Answer{Behavior: forward.Allow, DecidedBy: "rule", Message: v.Rule}
	case policy.Deny:
		return forward.Answer{Behavior: forward.Deny, DecidedBy: "rule", Message: "the upstream's policy does not allow it: " + v.Reason}
	}
	b := s.deps.Approvals
	if b == nil || (v.Decision == policy.Forward && pol.Upstream == nil) {
		return forward.Answer{Behavior: forward.Deny, Message: "the upstream tandem has no approver to ask"}
	}
	wait := min(time.Duration(max(r.WaitSeconds, 1))*time.Second, b.Options().Wait)
	hooks := approval.Hooks{Wait: wait}
	if v.Decision == policy.Forward {
		hooks.OnPending = func(a approval.Approval) { go s.forwardUp(ctx, pol.Upstream, a, wait) }
	}
	out, err := b.Ask(ctx, act, v.Rule, v.Reason, hooks)
	if err != nil {
		return forward.Answer{Behavior: forward.Deny, Message: "the upstream tandem could not ask: " + err.Error()}
	}
	a := out.Approval
	ans := forward.Answer{ID: a.ID, ExpiresAt: a.Expires}
	if a.Decision != nil {
		ans.DecidedBy, ans.Message = a.Decision.By, a.Decision.Reason
	}
	switch out.Kind {
	case approval.Run:
		ans.Behavior = forward.Allow
		if out.Remembered {
			ans.DecidedBy = "remembered"
		}
	case approval.Refused:
		ans.Behavior = forward.Deny
	case approval.TimedOut:
		ans.Behavior, ans.Message = forward.Deny, "nobody approved it upstream before it expired"
	default:
		ans.Behavior = forward.Pending
	}
	return ans
}
