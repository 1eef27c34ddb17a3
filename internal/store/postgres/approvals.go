package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
)

// AddApproval implements [store.Store].
func (db *DB) AddApproval(ctx context.Context, r store.ApprovalRow) error {
	return db.tx(ctx, "store add approval", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO approvals (id, instance_id, tenant, actor, session_id, session_name,
			target, tool, command, cwd, fingerprint, rule, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending', $13, $14)`,
			r.ID, r.InstanceID, r.Tenant, r.Actor, r.SessionID, r.SessionName, r.Target, r.Tool, r.Command, r.Cwd,
			r.Fingerprint, r.Rule, r.CreatedAt, r.ExpiresAt)
		if err != nil {
			return err
		}
		return notify(ctx, tx, ChannelApprovals, r.ID)
	})
}

// DecideApproval implements [store.Store]: an approval that is no longer
// pending is left as it is.
func (db *DB) DecideApproval(ctx context.Context, id, status, by, reason string, at time.Time) error {
	return db.tx(ctx, "store decide approval", func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE approvals SET status = $1, decided_by = $2, decision_reason = $3, decided_at = $4
			WHERE id = $5 AND status = 'pending'`, status, by, reason, at, id)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return notify(ctx, tx, ChannelApprovals, id)
	})
}

// DenyApprovalsOf implements [store.Store]: one UPDATE ... RETURNING, so
// of two processes denying at once only one gets each approval back.
func (db *DB) DenyApprovalsOf(ctx context.Context, instanceID, by, reason string, at time.Time) ([]store.ApprovalRow, error) {
	var out []store.ApprovalRow
	err := db.tx(ctx, "store deny approvals of instance", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE approvals SET status = 'denied', decided_by = $1, decision_reason = $2, decided_at = $3
			WHERE instance_id = $4 AND status = 'pending'
			RETURNING id, tenant, actor, session_id, session_name, target, tool, command, cwd, fingerprint, rule`,
			by, reason, at, instanceID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ApprovalRow, error) {
			r := store.ApprovalRow{InstanceID: instanceID, Status: "denied", DecidedBy: by, DecisionReason: reason, DecidedAt: &at}
			err := row.Scan(&r.ID, &r.Tenant, &r.Actor, &r.SessionID, &r.SessionName, &r.Target, &r.Tool,
				&r.Command, &r.Cwd, &r.Fingerprint, &r.Rule)
			return r, err
		})
		if err != nil || len(out) == 0 {
			return err
		}
		return notify(ctx, tx, ChannelApprovals, instanceID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PendingApprovals implements [store.Store].
func (db *DB) PendingApprovals(ctx context.Context) ([]store.ApprovalRow, error) {
	var out []store.ApprovalRow
	err := db.run(ctx, "store pending approvals", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT id, instance_id, tenant, actor, session_id, session_name, target, tool,
			command, cwd, fingerprint, rule, status, created_at, expires_at FROM approvals
			WHERE status = 'pending' ORDER BY created_at, id`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.ApprovalRow, error) {
			var r store.ApprovalRow
			err := row.Scan(&r.ID, &r.InstanceID, &r.Tenant, &r.Actor, &r.SessionID, &r.SessionName, &r.Target, &r.Tool,
				&r.Command, &r.Cwd, &r.Fingerprint, &r.Rule, &r.Status, &r.CreatedAt, &r.ExpiresAt)
			r.CreatedAt, r.ExpiresAt = utc(r.CreatedAt), utc(r.ExpiresAt)
			return r, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
