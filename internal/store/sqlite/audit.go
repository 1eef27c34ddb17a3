package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/tandem-sh/tandem/internal/store"
)

const auditCols = `seq, time, tenant, actor, claim_fingerprint, jti, session_id, session_name, target, tool,
	event, args, outcome, reason, exit_code, duration_ms, bytes, approval_id, sid, workspace, hash_version, prev_hash, hash`

const (
	auditHeadSQL   = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`
	auditInsertSQL = `INSERT INTO audit (` + auditCols + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// AppendAudit implements [store.Store]. The head is read and the record inserted
// under one BEGIN IMMEDIATE, so no other process can append in between.
func (s *DB) AppendAudit(ctx context.Context, build func(head store.AuditHead) (store.AuditRecord, error)) (store.AuditRecord, error) {
	var rec store.AuditRecord
	err := s.write(ctx, "store append audit", func(tx *sql.Tx) error {
		var head store.AuditHead
		err := tx.StmtContext(ctx, s.auditHead).QueryRowContext(ctx).Scan(&head.Seq, &head.Hash)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read head: %w", err)
		}
		if rec, err = build(head); err != nil {
			return err
		}
		if rec.Seq != head.Seq+1 {
			return fmt.Errorf("record seq %d does not follow head %d", rec.Seq, head.Seq)
		}
		rec.Time = rec.Time.UTC()
		_, err = tx.StmtContext(ctx, s.auditInsert).ExecContext(ctx,
			rec.Seq, fmtTime(rec.Time), rec.Tenant, rec.Actor, rec.ClaimFingerprint, rec.JTI, rec.SessionID,
			rec.SessionName, rec.Target, rec.Tool, rec.Event, string(rec.Args), rec.Outcome, rec.Reason,
			nullInt(rec.ExitCode), rec.DurationMs, rec.Bytes, rec.ApprovalID, rec.SID, rec.Workspace, rec.HashVersion,
			rec.PrevHash, rec.Hash)
		return err
	})
	if err != nil {
		return store.AuditRecord{}, err
	}
	return rec, nil
}

// ScanAudit implements [store.Store]. One SELECT is one read transaction in
// SQLite, so the scan sees a single snapshot while others keep appending.
func (s *DB) ScanAudit(ctx context.Context, fn func(store.AuditRecord) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT `+auditCols+` FROM audit ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("store scan audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return fmt.Errorf("store scan audit: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store scan audit: %w", err)
	}
	return nil
}

// TailAudit implements [store.Store].
func (s *DB) TailAudit(ctx context.Context, n int, f store.AuditFilter) ([]store.AuditRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	q, args := `SELECT `+auditCols+` FROM audit WHERE (? = '' OR session_name = ?) AND (? = '' OR tenant = ?) AND (? = 0 OR seq < ?)
		ORDER BY seq DESC LIMIT ?`,
		[]any{f.SessionName, f.SessionName, f.Tenant, f.Tenant, f.Before, f.Before, n}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store tail audit: %w", err)
	}
	defer rows.Close()
	var out []store.AuditRecord
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("store tail audit: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store tail audit: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// scanAudit reads one row of auditCols.
func scanAudit(rows *sql.Rows) (store.AuditRecord, error) {
	var (
		r    store.AuditRecord
		t    string
		args string
		exit sql.NullInt64
	)
	if err := rows.Scan(&r.Seq, &t, &r.Tenant, &r.Actor, &r.ClaimFingerprint, &r.JTI, &r.SessionID, &r.SessionName,
		&r.Target, &r.Tool, &r.Event, &args, &r.Outcome, &r.Reason, &exit, &r.DurationMs, &r.Bytes, &r.ApprovalID,
		&r.SID, &r.Workspace, &r.HashVersion, &r.PrevHash, &r.Hash); err != nil {
		return store.AuditRecord{}, err
	}
	var err error
	if r.Time, err = parseTime(t); err != nil {
		return store.AuditRecord{}, &store.CorruptRecordError{Seq: r.Seq, Err: err}
	}
	if fmtTime(r.Time) != t {
		// Only this spelling is ever written; another one that parses to
		// the same instant is still an edit.
		return store.AuditRecord{}, &store.CorruptRecordError{Seq: r.Seq, Err: fmt.Errorf("stored time %q is not in canonical form", t)}
	}
	if args != "" {
		r.Args = []byte(args)
	}
	r.ExitCode = intPtr(exit)
	return r, nil
}
