package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store"
)

// Audit events of approvals.
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalDecided   = "approval_decided"
)

// Approvals makes approval requests and decisions durable: a row in the
// store, so that a later process can deny what this one left pending, and
// an audit record. It implements approval.Journal.
type Approvals struct{ j *Journal }

// Approvals returns the journal's approval side.
func (j *Journal) Approvals() Approvals { return Approvals{j} }

// Requested implements approval.Journal.
func (a Approvals) Requested(ctx context.Context, r approval.Request) error {
	act := r.Action
	if err := a.j.st.AddApproval(ctx, store.ApprovalRow{
		ID: r.ID, InstanceID: a.j.instance, Tenant: act.Tenant, Actor: act.Actor, SessionID: act.SessionID,
		SessionName: act.SessionName, Target: act.Target, Tool: act.Tool, Command: act.Command, Cwd: act.Cwd,
		Fingerprint: r.Fingerprint, Rule: r.Rule, CreatedAt: r.Created, ExpiresAt: r.Expires,
	}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	fields := map[string]string{"command": act.Command, "cwd": act.Cwd, "fingerprint": r.Fingerprint,
		"rule": r.Rule, "expires": r.Expires.UTC().Format(time.RFC3339)}
	if act.Parent != "" {
		fields["parent"] = act.Parent // the agent's line that started the held program
	}
	args, _ := json.Marshal(fields)
	_, err := a.j.audit.Append(ctx, audit.Record{Time: r.Created, Tenant: act.Tenant, Actor: act.Actor,
		SessionID: act.SessionID, SessionName: act.SessionName, Target: act.Target, Tool: act.Tool,
		Event: EventApprovalRequested, Args: args, Outcome: "pending", Reason: r.Reason, ApprovalID: r.ID})
	return err
}

// Decided implements approval.Journal.
func (a Approvals) Decided(ctx context.Context, ap approval.Approval) error {
	d, act := ap.Decision, ap.Action
	if err := a.j.st.DecideApproval(ctx, ap.ID, string(ap.Status), d.By, d.Reason, d.At); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	args, _ := json.Marshal(map[string]any{"by": d.By, "approver": d.Approver, "rule": ap.Rule,
		"rememberMinutes": d.Remember.Minutes()})
	_, err := a.j.audit.Append(ctx, audit.Record{Time: d.At, Tenant: act.Tenant, Actor: act.Actor,
		SessionID: act.SessionID, SessionName: act.SessionName, Target: act.Target, Tool: act.Tool,
		Event: EventApprovalDecided, Args: args, Outcome: string(ap.Status), Reason: d.Reason, ApprovalID: ap.ID})
	return err
}

// denyApprovalsOf denies and audits the pending approvals of a process
// that is gone: its sessions, and the calls that waited, are gone too.
func (j *Journal) denyApprovalsOf(ctx context.Context, instance, reason string, now time.Time) error {
	rows, err := j.st.DenyApprovalsOf(ctx, instance, approval.ByRestart, reason, now)
	if err != nil {
		return fmt.Errorf("journal: recover approvals: %w", err)
	}
	for _, r := range rows {
		args, _ := json.Marshal(map[string]string{"by": approval.ByRestart, "rule": r.Rule, "instance": instance})
		if _, err := j.audit.Append(ctx, audit.Record{Time: now, Tenant: r.Tenant, Actor: r.Actor,
			SessionID: r.SessionID, SessionName: r.SessionName, Target: r.Target, Tool: r.Tool,
			Event: EventApprovalDecided, Args: args, Outcome: string(approval.Denied), Reason: reason,
			ApprovalID: r.ID}); err != nil {
			return err
		}
	}
	return nil
}
