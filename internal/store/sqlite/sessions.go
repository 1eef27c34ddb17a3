package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

const sessionCols = `id, name, tenant, actor, owner, instance_id, target, kind, host, port, username,
	token_hash, status, created_at, ended_at, end_reason`

// CreateSession implements [store.Store].
func (s *DB) CreateSession(ctx context.Context, r store.SessionRow) error {
	if len(r.TokenHash) != 32 {
		return fmt.Errorf("store create session %q: token hash is %d bytes, want 32 (SHA-256)", r.Name, len(r.TokenHash))
	}
	return s.write(ctx, "store create session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, NULL, '')`,
			r.ID, r.Name, r.Tenant, r.Actor, r.Owner, r.InstanceID, r.Target, r.Kind, r.Host, r.Port, r.Username,
			r.TokenHash, fmtTime(r.CreatedAt))
		return err
	})
}

// EndSession implements [store.Store].
func (s *DB) EndSession(ctx context.Context, id, reason string, at time.Time) error {
	return s.write(ctx, "store end session", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE sessions SET status = 'ended', ended_at = ?, end_reason = ? WHERE id = ? AND status = 'active'`,
			fmtTime(at), reason, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		return err // nil: already ended, nothing to do
	})
}

// EndSessionsOf implements [store.Store]. The single UPDATE ... RETURNING is
// atomic, so of two processes reaping the same instance only one gets
// each session back.
func (s *DB) EndSessionsOf(ctx context.Context, instanceID, reason string, at time.Time) ([]store.SessionRow, error) {
	var out []store.SessionRow
	err := s.write(ctx, "store end sessions of instance", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx,
			`UPDATE sessions SET status = 'ended', ended_at = ?, end_reason = ?
			 WHERE instance_id = ? AND status = 'active' RETURNING `+sessionCols,
			fmtTime(at), reason, instanceID)
		if err != nil {
			return err
		}
		out, err = scanSessions(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	sortSessions(out)
	return out, nil
}

// FindEnded implements [store.Store].
func (s *DB) FindEnded(ctx context.Context, tenant, name string) ([]store.SessionRow, error) {
	return s.querySessions(ctx, "store find ended sessions", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = ? AND name = ? AND status = 'ended' ORDER BY ended_at DESC, created_at DESC, id`,
		tenant, name)
}

// ActiveSessionsOf implements [store.Store].
func (s *DB) ActiveSessionsOf(ctx context.Context, tenant, actor, owner string) ([]store.SessionRow, error) {
	return s.querySessions(ctx, "store active sessions of a caller", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = ? AND actor = ? AND owner = ? AND status = 'active' ORDER BY created_at, id`, tenant, actor, owner)
}

// ActiveSessions implements [store.Store].
func (s *DB) ActiveSessions(ctx context.Context) ([]store.SessionRow, error) {
	return s.querySessions(ctx, "store active sessions", `SELECT `+sessionCols+` FROM sessions
		WHERE status = 'active' ORDER BY created_at, id`)
}

// querySessions runs a read of sessionCols rows.
func (s *DB) querySessions(ctx context.Context, op, query string, args ...any) ([]store.SessionRow, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	out, err := scanSessions(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// scanSessions reads and closes rows of sessionCols.
func scanSessions(rows *sql.Rows) ([]store.SessionRow, error) {
	defer rows.Close()
	var out []store.SessionRow
	for rows.Next() {
		r, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanSession reads one row of sessionCols, then the extra columns after
// them into extra.
func scanSession(rows *sql.Rows, extra ...any) (store.SessionRow, error) {
	var (
		r       store.SessionRow
		created string
		ended   sql.NullString
	)
	dest := append([]any{&r.ID, &r.Name, &r.Tenant, &r.Actor, &r.Owner, &r.InstanceID, &r.Target, &r.Kind, &r.Host,
		&r.Port, &r.Username, &r.TokenHash, &r.Status, &created, &ended, &r.EndReason}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return store.SessionRow{}, err
	}
	var errC, errE error
	r.CreatedAt, errC = parseTime(created)
	r.EndedAt, errE = parseNullTime(ended)
	if err := errors.Join(errC, errE); err != nil {
		return store.SessionRow{}, err
	}
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

const commandInsertSQL = `INSERT INTO commands (id, session_id, source, command, cwd, exit_code,
	started_at, duration_ms, stdout_bytes, stderr_bytes, stdout_path, stderr_path, connections)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// AddCommand implements [store.Store].
func (s *DB) AddCommand(ctx context.Context, c store.CommandRow) error {
	conns, err := store.EncodeConnections(c.Connections)
	if err != nil {
		return fmt.Errorf("store add command: %w", err)
	}
	return s.write(ctx, "store add command", func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.commandInsert).ExecContext(ctx,
			c.ID, c.SessionID, c.Source, c.Command, c.Cwd, nullInt(c.ExitCode), fmtTime(c.StartedAt),
			c.DurationMs, c.StdoutBytes, c.StderrBytes, c.StdoutPath, c.StderrPath, conns)
		return err
	})
}

// Commands implements [store.Store].
func (s *DB) Commands(ctx context.Context, sessionID string) ([]store.CommandRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, session_id, source, command, cwd, exit_code, started_at,
		duration_ms, stdout_bytes, stderr_bytes, stdout_path, stderr_path, connections
		FROM commands WHERE session_id = ? ORDER BY started_at, rowid`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store commands: %w", err)
	}
	defer rows.Close()
	var out []store.CommandRow
	for rows.Next() {
		var (
			c       store.CommandRow
			exit    sql.NullInt64
			started string
			conns   string
		)
		if err := rows.Scan(&c.ID, &c.SessionID, &c.Source, &c.Command, &c.Cwd, &exit, &started,
			&c.DurationMs, &c.StdoutBytes, &c.StderrBytes, &c.StdoutPath, &c.StderrPath, &conns); err != nil {
			return nil, fmt.Errorf("store commands: %w", err)
		}
		if c.Connections, err = store.DecodeConnections(conns); err != nil {
			return nil, fmt.Errorf("store commands: %s: %w", c.ID, err)
		}
		c.ExitCode = intPtr(exit)
		if c.StartedAt, err = parseTime(started); err != nil {
			return nil, fmt.Errorf("store commands: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store commands: %w", err)
	}
	return out, nil
}

// Session implements [store.Store].
func (s *DB) Session(ctx context.Context, id string) (store.SessionRow, error) {
	return s.oneSession(ctx, "store session", `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id)
}

// ActiveSession implements [store.Store].
func (s *DB) ActiveSession(ctx context.Context, tenant, actor, owner, name string) (store.SessionRow, error) {
	return s.oneSession(ctx, "store active session", `SELECT `+sessionCols+` FROM sessions
		WHERE tenant = ? AND actor = ? AND owner = ? AND name = ? AND status = 'active' ORDER BY created_at DESC LIMIT 1`, tenant, actor, owner, name)
}

// oneSession runs a query for at most one session; ErrNotFound if none.
func (s *DB) oneSession(ctx context.Context, op, query string, args ...any) (store.SessionRow, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return store.SessionRow{}, fmt.Errorf("%s: %w", op, err)
	}
	out, err := scanSessions(rows)
	switch {
	case err != nil:
		return store.SessionRow{}, fmt.Errorf("%s: %w", op, err)
	case len(out) == 0:
		return store.SessionRow{}, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return out[0], nil
}

// CommandSession implements [store.Store].
func (s *DB) CommandSession(ctx context.Context, commandID string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT session_id FROM commands WHERE id = ?`, commandID).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("command %q: %w", commandID, store.ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("store command session: %w", err)
	}
	return id, nil
}
