package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// AddApproval records a pending approval.
func (s *DB) AddApproval(ctx context.Context, r store.ApprovalRow) error {
	return s.write(ctx, "store add approval", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, instance_id, tenant, actor, session_id, session_name,
			target, tool, command, cwd, fingerprint, rule, status, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
			r.ID, r.InstanceID, r.Tenant, r.Actor, r.SessionID, r.SessionName, r.Target, r.Tool, r.Command, r.Cwd,
			r.Fingerprint, r.Rule, fmtTime(r.CreatedAt), fmtTime(r.ExpiresAt))
		return err
	})
}

// DecideApproval records the answer to a pending approval; an approval
// that is no longer pending is left as it is.
func (s *DB) DecideApproval(ctx context.Context, id, status, by, reason string, at time.Time) error {
	return s.write(ctx, "store decide approval", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decision_reason = ?, decided_at = ?
			WHERE id = ? AND status = 'pending'`, status, by, reason, fmtTime(at), id)
		return err
	})
}

// DenyApprovalsOf denies the pending approvals of a tandem process that is
// gone, atomically, and returns them.
func (s *DB) DenyApprovalsOf(ctx context.Context, instanceID, by, reason string, at time.Time) ([]store.ApprovalRow, error) {
	var out []store.ApprovalRow
	err := s.write(ctx, "store deny approvals of instance", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE approvals SET status = 'denied', decided_by = ?, decision_reason = ?, decided_at = ?
			WHERE instance_id = ? AND status = 'pending'
			RETURNING id, tenant, actor, session_id, session_name, target, tool, command, cwd, fingerprint, rule`,
			by, reason, fmtTime(at), instanceID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r := store.ApprovalRow{InstanceID: instanceID, Status: "denied", DecidedBy: by, DecisionReason: reason, DecidedAt: &at}
			if err := rows.Scan(&r.ID, &r.Tenant, &r.Actor, &r.SessionID, &r.SessionName, &r.Target, &r.Tool,
				&r.Command, &r.Cwd, &r.Fingerprint, &r.Rule); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PendingApprovals implements [store.Store].
func (s *DB) PendingApprovals(ctx context.Context) ([]store.ApprovalRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, instance_id, tenant, actor, session_id, session_name, target, tool,
		command, cwd, fingerprint, rule, status, created_at, expires_at FROM approvals
		WHERE status = 'pending' ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store pending approvals: %w", err)
	}
	defer rows.Close()
	var out []store.ApprovalRow
	for rows.Next() {
		var (
			r                store.ApprovalRow
			created, expires string
		)
		if err := rows.Scan(&r.ID, &r.InstanceID, &r.Tenant, &r.Actor, &r.SessionID, &r.SessionName, &r.Target, &r.Tool,
			&r.Command, &r.Cwd, &r.Fingerprint, &r.Rule, &r.Status, &created, &expires); err != nil {
			return nil, fmt.Errorf("store pending approvals: %w", err)
		}
		var errC, errE error
		r.CreatedAt, errC = parseTime(created)
		r.ExpiresAt, errE = parseTime(expires)
		if err := errors.Join(errC, errE); err != nil {
			return nil, fmt.Errorf("store pending approvals: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store pending approvals: %w", err)
	}
	return out, nil
}
