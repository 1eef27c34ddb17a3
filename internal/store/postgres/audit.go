package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
)

const auditCols = `seq, time, time_nanos, tenant, actor, claim_fingerprint, jti, session_id, session_name, target, tool,
	event, args, outcome, reason, exit_code, duration_ms, bytes, approval_id, sid, workspace, hash_version, prev_hash, hash`

// scanPage is how many audit records ScanAudit reads per query.
const scanPage = 1000

// AppendAudit implements [store.Store]. The chain stays one chain across
// every process and node on the database: the transaction first takes the
// advisory lock auditLock (pg_advisory_xact_lock), then reads the head,
// inserts the record built on it and commits, which releases the lock. The
// next appender, waiting on the lock, reads the head only after that
// commit is visible (each statement of a READ COMMITTED transaction sees
// what committed before it began), so no two records ever follow the same
// head.
func (db *DB) AppendAudit(ctx context.Context, build func(head store.AuditHead) (store.AuditRecord, error)) (store.AuditRecord, error) {
	var rec store.AuditRecord
	err := db.tx(ctx, "store append audit", func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, auditLock); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		var head store.AuditHead
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&head.Seq, &head.Hash)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read head: %w", err)
		}
		if rec, err = build(head); err != nil {
			return err
		}
		if rec.Seq != head.Seq+1 {
			return fmt.Errorf("record seq %d does not follow head %d", rec.Seq, head.Seq)
		}
		rec.Time = rec.Time.UTC()
		args := rec.Args
		if args == nil {
			args = []byte{}
		}
		_, err = tx.Exec(ctx, `INSERT INTO audit (`+auditCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)`,
			rec.Seq, rec.Time, rec.Time.Nanosecond()%1000, rec.Tenant, rec.Actor, rec.ClaimFingerprint, rec.JTI, rec.SessionID,
			rec.SessionName, rec.Target, rec.Tool, rec.Event, []byte(args), rec.Outcome, rec.Reason,
			rec.ExitCode, rec.DurationMs, rec.Bytes, rec.ApprovalID, rec.SID, rec.Workspace, rec.HashVersion,
			rec.PrevHash, rec.Hash)
		return err
	})
	if err != nil {
		return store.AuditRecord{}, err
	}
	return rec, nil
}

// Writable implements [store.Store]: it takes the audit lock, checks that
// the database takes writes (a hot standby does not), and commits.
func (db *DB) Writable(ctx context.Context) error {
	return db.tx(ctx, "store: audit lock", func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, auditLock); err != nil {
			return err
		}
		var ro string
		if err := tx.QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&ro); err != nil {
			return err
		}
		if ro == "on" {
			return fmt.Errorf("PostgreSQL at %s is read-only", db.addr)
		}
		return nil
	})
}

// ScanAudit implements [store.Store]. It reads page by page inside one
// REPEATABLE READ transaction, so the scan sees one snapshot however long
// it takes while others keep appending; each page, not the whole scan, is
// bounded in time when ctx has no deadline. fn runs between pages, with no
// query open.
func (db *DB) ScanAudit(ctx context.Context, fn func(store.AuditRecord) error) error {
	const op = "store scan audit"
	var tx pgx.Tx
	if err := db.run(ctx, op, func(ctx context.Context) (err error) {
		tx, err = db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		return err
	}); err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), db.opTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	var after int64
	for {
		var page []store.AuditRecord
		if err := db.run(ctx, op, func(ctx context.Context) error {
			rows, err := tx.Query(ctx, `SELECT `+auditCols+` FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, scanPage)
			if err != nil {
				return err
			}
			page, err = collectAudit(rows)
			return err
		}); err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		after = page[len(page)-1].Seq
	}
}

// TailAudit implements [store.Store].
func (db *DB) TailAudit(ctx context.Context, n int, f store.AuditFilter) ([]store.AuditRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []store.AuditRecord
	err := db.run(ctx, "store tail audit", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT `+auditCols+` FROM audit
			WHERE ($1 = '' OR session_name = $1) AND ($2 = '' OR tenant = $2) AND ($4::bigint = 0 OR seq < $4)
			ORDER BY seq DESC LIMIT $3`,
			f.SessionName, f.Tenant, n, f.Before)
		if err != nil {
			return err
		}
		out, err = collectAudit(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// collectAudit reads and closes rows of auditCols.
func collectAudit(rows pgx.Rows) ([]store.AuditRecord, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AuditRecord, error) {
		var (
			r     store.AuditRecord
			nanos int16
			args  []byte
		)
		if err := row.Scan(&r.Seq, &r.Time, &nanos, &r.Tenant, &r.Actor, &r.ClaimFingerprint, &r.JTI, &r.SessionID,
			&r.SessionName, &r.Target, &r.Tool, &r.Event, &args, &r.Outcome, &r.Reason, &r.ExitCode, &r.DurationMs,
			&r.Bytes, &r.ApprovalID, &r.SID, &r.Workspace, &r.HashVersion, &r.PrevHash, &r.Hash); err != nil {
			return store.AuditRecord{}, err
		}
		if nanos < 0 || nanos > 999 || r.Time.Nanosecond()%1000 != 0 {
			return store.AuditRecord{}, &store.CorruptRecordError{Seq: r.Seq,
				Err: fmt.Errorf("stored time %v and nanoseconds %d do not make one instant", r.Time, nanos)}
		}
		r.Time = r.Time.UTC().Add(time.Duration(nanos))
		if len(args) > 0 {
			r.Args = args
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
