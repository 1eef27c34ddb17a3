package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// RegisterInstance implements [store.Store].
func (s *DB) RegisterInstance(ctx context.Context, in store.Instance) error {
	return s.write(ctx, "store register instance", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO instances (id, pid, host, url, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?)`,
			in.ID, in.PID, in.Host, in.URL, fmtTime(in.StartedAt), fmtTime(in.StartedAt))
		return err
	})
}

// Heartbeat implements [store.Store].
func (s *DB) Heartbeat(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "store heartbeat", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE instances SET heartbeat_at = ? WHERE id = ? AND ended_at IS NULL`, fmtTime(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return instanceState(ctx, tx, id)
	})
}

// EndInstance implements [store.Store].
func (s *DB) EndInstance(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "store end instance", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE instances SET ended_at = ? WHERE id = ? AND ended_at IS NULL`, fmtTime(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		if err := instanceState(ctx, tx, id); !errors.Is(err, store.ErrInstanceEnded) {
			return err
		}
		return nil
	})
}

// instanceState explains why an update matched no live instance: it is
// unknown (store.ErrNotFound) or already ended (store.ErrInstanceEnded).
func instanceState(ctx context.Context, tx *sql.Tx, id string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM instances WHERE id = ?`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("instance %q: %w", id, store.ErrNotFound)
	case err != nil:
		return err
	default:
		return fmt.Errorf("instance %q: %w", id, store.ErrInstanceEnded)
	}
}

// Instance implements [store.Store].
func (s *DB) Instance(ctx context.Context, id string) (store.Instance, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, pid, host, url, started_at, heartbeat_at, ended_at FROM instances WHERE id = ?`, id)
	if err != nil {
		return store.Instance{}, fmt.Errorf("store instance: %w", err)
	}
	ins, err := scanInstances(rows)
	if err != nil {
		return store.Instance{}, fmt.Errorf("store instance: %w", err)
	}
	if len(ins) == 0 {
		return store.Instance{}, fmt.Errorf("instance %q: %w", id, store.ErrNotFound)
	}
	return ins[0], nil
}

// DeadInstances implements [store.Store].
func (s *DB) DeadInstances(ctx context.Context, staleBefore time.Time) ([]store.Instance, error) {
	rows, err := s.db.QueryContext(ctx,
		`SELECT id, pid, host, url, started_at, heartbeat_at, ended_at FROM instances
		 WHERE ended_at IS NULL AND heartbeat_at < ? ORDER BY heartbeat_at, id`, fmtTime(staleBefore))
	if err != nil {
		return nil, fmt.Errorf("store dead instances: %w", err)
	}
	out, err := scanInstances(rows)
	if err != nil {
		return nil, fmt.Errorf("store dead instances: %w", err)
	}
	return out, nil
}

// scanInstances reads and closes rows of instances.
func scanInstances(rows *sql.Rows) ([]store.Instance, error) {
	defer rows.Close()
	var out []store.Instance
	for rows.Next() {
		var (
			in                   store.Instance
			started, heartbeat   string
			ended                sql.NullString
			errS, errH, errEnded error
		)
		if err := rows.Scan(&in.ID, &in.PID, &in.Host, &in.URL, &started, &heartbeat, &ended); err != nil {
			return nil, err
		}
		in.StartedAt, errS = parseTime(started)
		in.HeartbeatAt, errH = parseTime(heartbeat)
		in.EndedAt, errEnded = parseNullTime(ended)
		if err := errors.Join(errS, errH, errEnded); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}
