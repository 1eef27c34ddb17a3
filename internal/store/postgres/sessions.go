package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tandem-sh/tandem/internal/store"
)

const sessionCols = `id, name, tenant, actor, owner, instance_id, target, kind, host, port, username,
	token_hash, status, created_at, ended_at, end_reason`

// CreateSession implements [store.Store].
func (db *DB) CreateSession(ctx context.Context, r store.SessionRow) error {
	if len(r.TokenHash) != 32 {
		return fmt.Errorf("store create session %q: token hash is %d bytes, want 32 (SHA-256)", r.Name, len(r.TokenHash))
	}
	err := db.tx(ctx, "store create session", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO sessions (`+sessionCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'active', $13, NULL, '')`,
			r.ID, r.Name, r.Tenant, r.Actor, r.Owner, r.InstanceID, r.Target, r.Kind, r.Host, r.Port, r.Username,
			r.TokenHash, r.CreatedAt)
		if err != nil {
			return err
		}
		return notify(ctx, tx, ChannelSessions, r.ID)
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "sessions_active_name" {
		return fmt.Errorf("store create session %q: %w", r.Name, store.ErrNameTaken)
	}
	return err
}

// EndSession implements [store.Store].
func (db *DB) EndSession(ctx context.Context, id, reason string, at time.Time) error {
	return db.tx(ctx, "store end session", func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx,
			`UPDATE sessions SET status = 'ended', ended_at = $1, end_reason = $2 WHERE id = $3 AND status = 'active'`,
			at, reason, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return notify(ctx, tx, ChannelSessions, id)
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1`, id).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		return err // nil: already ended, nothing to do
	})
}

// EndSessionsOf implements [store.Store]. Two processes reaping the same
// instance at once both run the UPDATE; the second waits for the first's
// row locks, then finds those rows ended and skips them, so only one gets
// each session back.
func (db *DB) EndSessionsOf(ctx context.Context, instanceID, reason string, at time.Time) ([]store.SessionRow, error) {
	var out []store.SessionRow
	err := db.tx(ctx, "store end sessions of instance", func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE sessions SET status = 'ended', ended_at = $1, end_reason = $2
			WHERE instance_id = $3 AND status = 'active' RETURNING `+sessionCols, at, reason, instanceID)
		if err != nil {
			return err
		}
		if out, err = scanSessions(rows); err != nil || len(out) == 0 {
			return err
		}
		return notify(ctx, tx, ChannelSessions, instanceID)
	})
	if err != nil {
		return nil, err
	}
	sortSessions(out)
	return out, nil
}

// FindEnded implements [store.Store].
func (db *DB) FindEnded(ctx context.Context, tenant, name string) ([]store.SessionRow, error) {
	return db.querySessions(ctx, "store find ended sessions", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = $1 AND name = $2 AND status = 'ended' ORDER BY ended_at DESC, created_at DESC, id`,
		tenant, name)
}

// ActiveSessionsOf implements [store.Store]; the index of active names
// serves it.
func (db *DB) ActiveSessionsOf(ctx context.Context, tenant, actor, owner string) ([]store.SessionRow, error) {
	return db.querySessions(ctx, "store active sessions of a caller", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = $1 AND actor = $2 AND owner = $3 AND status = 'active' ORDER BY created_at, id`, tenant, actor, owner)
}

// ActiveSessions implements [store.Store].
func (db *DB) ActiveSessions(ctx context.Context) ([]store.SessionRow, error) {
	return db.querySessions(ctx, "store active sessions", `SELECT `+sessionCols+` FROM sessions
		WHERE status = 'active' ORDER BY created_at, id`)
}

// querySessions runs a read of sessionCols rows.
func (db *DB) querySessions(ctx context.Context, op, query string, args ...any) ([]store.SessionRow, error) {
	var out []store.SessionRow
	err := db.run(ctx, op, func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		out, err = scanSessions(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanSessions reads and closes rows of sessionCols.
func scanSessions(rows pgx.Rows) ([]store.SessionRow, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SessionRow, error) {
		return scanSession(row)
	})
}

// scanSession reads one row of sessionCols, then the extra columns after
// them into extra.
func scanSession(row pgx.Row, extra ...any) (store.SessionRow, error) {
	var (
		r     store.SessionRow
		ended *time.Time
	)
	dest := append([]any{&r.ID, &r.Name, &r.Tenant, &r.Actor, &r.Owner, &r.InstanceID, &r.Target, &r.Kind, &r.Host,
		&r.Port, &r.Username, &r.TokenHash, &r.Status, &r.CreatedAt, &ended, &r.EndReason}, extra...)
	if err := row.Scan(dest...); err != nil {
		return store.SessionRow{}, err
	}
	r.CreatedAt, r.EndedAt = utc(r.CreatedAt), utcPtr(ended)
	return r, nil
}

// sortSessions orders rows oldest first; RETURNING gives no order.
func sortSessions(rs []store.SessionRow) {
	slices.SortFunc(rs, func(a, b store.SessionRow) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// AddCommand implements [store.Store].
func (db *DB) AddCommand(ctx context.Context, c store.CommandRow) error {
	conns, err := store.EncodeConnections(c.Connections)
	if err != nil {
		return fmt.Errorf("store add command: %w", err)
	}
	return db.run(ctx, "store add command", func(ctx context.Context) error {
		_, err := db.pool.Exec(ctx, `INSERT INTO commands (id, session_id, source, command, cwd, exit_code,
			started_at, duration_ms, stdout_bytes, stderr_bytes, stdout_path, stderr_path, connections)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			c.ID, c.SessionID, c.Source, c.Command, c.Cwd, c.ExitCode, c.StartedAt,
			c.DurationMs, c.StdoutBytes, c.StderrBytes, c.StdoutPath, c.StderrPath, conns)
		return err
	})
}

// Commands implements [store.Store].
func (db *DB) Commands(ctx context.Context, sessionID string) ([]store.CommandRow, error) {
	var out []store.CommandRow
	err := db.run(ctx, "store commands", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT id, session_id, source, command, cwd, exit_code, started_at,
			duration_ms, stdout_bytes, stderr_bytes, stdout_path, stderr_path, connections
			FROM commands WHERE session_id = $1 ORDER BY started_at, n`, sessionID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.CommandRow, error) {
			var c store.CommandRow
			var conns string
			err := row.Scan(&c.ID, &c.SessionID, &c.Source, &c.Command, &c.Cwd, &c.ExitCode, &c.StartedAt,
				&c.DurationMs, &c.StdoutBytes, &c.StderrBytes, &c.StdoutPath, &c.StderrPath, &conns)
			if err != nil {
				return c, err
			}
			c.StartedAt = utc(c.StartedAt)
			c.Connections, err = store.DecodeConnections(conns)
			return c, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Session implements [store.Store].
func (db *DB) Session(ctx context.Context, id string) (store.SessionRow, error) {
	return db.oneSession(ctx, "store session", `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
}

// ActiveSession implements [store.Store].
func (db *DB) ActiveSession(ctx context.Context, tenant, actor, owner, name string) (store.SessionRow, error) {
	return db.oneSession(ctx, "store active session", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = $1 AND actor = $2 AND owner = $3 AND name = $4 AND status = 'active'`, tenant, actor, owner, name)
}

// oneSession runs a query for at most one session; ErrNotFound if none.
func (db *DB) oneSession(ctx context.Context, op, query string, args ...any) (store.SessionRow, error) {
	out, err := db.querySessions(ctx, op, query, args...)
	switch {
	case err != nil:
		return store.SessionRow{}, err
	case len(out) == 0:
		return store.SessionRow{}, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return out[0], nil
}

// CommandSession implements [store.Store].
func (db *DB) CommandSession(ctx context.Context, commandID string) (string, error) {
	var id string
	err := db.run(ctx, "store command session", func(ctx context.Context) error {
		return db.pool.QueryRow(ctx, `SELECT session_id FROM commands WHERE id = $1`, commandID).Scan(&id)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("command %q: %w", commandID, store.ErrNotFound)
	}
	return id, err
}
