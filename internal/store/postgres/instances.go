package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
)

const instanceCols = `id, pid, host, url, started_at, heartbeat_at, ended_at`

// RegisterInstance implements [store.Store].
func (db *DB) RegisterInstance(ctx context.Context, in store.Instance) error {
	return db.run(ctx, "store register instance", func(ctx context.Context) error {
		_, err := db.pool.Exec(ctx,
			`INSERT INTO instances (id, pid, host, url, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5, $5)`,
			in.ID, in.PID, in.Host, in.URL, in.StartedAt)
		return err
	})
}

// Heartbeat implements [store.Store].
func (db *DB) Heartbeat(ctx context.Context, id string, at time.Time) error {
	return db.tx(ctx, "store heartbeat", func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE instances SET heartbeat_at = $1 WHERE id = $2 AND ended_at IS NULL`, at, id)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		return instanceState(ctx, tx, id)
	})
}

// EndInstance implements [store.Store].
func (db *DB) EndInstance(ctx context.Context, id string, at time.Time) error {
	return db.tx(ctx, "store end instance", func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE instances SET ended_at = $1 WHERE id = $2 AND ended_at IS NULL`, at, id)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		if err := instanceState(ctx, tx, id); !errors.Is(err, store.ErrInstanceEnded) {
			return err
		}
		return nil
	})
}

// instanceState explains why an update matched no live instance: it is
// unknown (ErrNotFound) or already ended (ErrInstanceEnded).
func instanceState(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM instances WHERE id = $1`, id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("instance %q: %w", id, store.ErrNotFound)
	case err != nil:
		return err
	default:
		return fmt.Errorf("instance %q: %w", id, store.ErrInstanceEnded)
	}
}

// Instance implements [store.Store].
func (db *DB) Instance(ctx context.Context, id string) (store.Instance, error) {
	var out []store.Instance
	err := db.run(ctx, "store instance", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = $1`, id)
		if err != nil {
			return err
		}
		out, err = scanInstances(rows)
		return err
	})
	if err != nil {
		return store.Instance{}, err
	}
	if len(out) == 0 {
		return store.Instance{}, fmt.Errorf("instance %q: %w", id, store.ErrNotFound)
	}
	return out[0], nil
}

// DeadInstances implements [store.Store].
func (db *DB) DeadInstances(ctx context.Context, staleBefore time.Time) ([]store.Instance, error) {
	var out []store.Instance
	err := db.run(ctx, "store dead instances", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT `+instanceCols+` FROM instances
			WHERE ended_at IS NULL AND heartbeat_at < $1 ORDER BY heartbeat_at, id`, staleBefore)
		if err != nil {
			return err
		}
		out, err = scanInstances(rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanInstances reads and closes rows of instanceCols.
func scanInstances(rows pgx.Rows) ([]store.Instance, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Instance, error) {
		var (
			in    store.Instance
			ended *time.Time
		)
		if err := row.Scan(&in.ID, &in.PID, &in.Host, &in.URL, &in.StartedAt, &in.HeartbeatAt, &ended); err != nil {
			return store.Instance{}, err
		}
		in.StartedAt, in.HeartbeatAt, in.EndedAt = utc(in.StartedAt), utc(in.HeartbeatAt), utcPtr(ended)
		return in, nil
	})
}
