package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
)

// AddReplay implements [store.Store].
func (db *DB) AddReplay(ctx context.Context, sessionID string, keyHash []byte, recordingPath string) error {
	if len(keyHash) != 32 {
		return fmt.Errorf("store add replay: key hash is %d bytes, want 32 (SHA-256)", len(keyHash))
	}
	return db.run(ctx, "store add replay", func(ctx context.Context) error {
		_, err := db.pool.Exec(ctx, `INSERT INTO replays (session_id, monitor_key_hash, recording_path) VALUES ($1, $2, $3)`,
			sessionID, keyHash, recordingPath)
		return err
	})
}

// FindReplay implements [store.Store].
func (db *DB) FindReplay(ctx context.Context, keyHash []byte) (store.Replay, error) {
	return db.replay(ctx, "store find replay", "r.monitor_key_hash = $1", keyHash)
}

// ReplayOf implements [store.Store].
func (db *DB) ReplayOf(ctx context.Context, sessionID string) (store.Replay, error) {
	return db.replay(ctx, "store replay of a session", "r.session_id = $1", sessionID)
}

// replay finds the one replay that where (a condition on replays r, with
// one parameter) picks, with its session's name and status.
func (db *DB) replay(ctx context.Context, op, where string, arg any) (store.Replay, error) {
	var r store.Replay
	err := db.run(ctx, op, func(ctx context.Context) error {
		return db.pool.QueryRow(ctx, `SELECT s.id, s.name, s.status, r.recording_path
			FROM replays r JOIN sessions s ON s.id = r.session_id WHERE `+where, arg).
			Scan(&r.SessionID, &r.Name, &r.Status, &r.RecordingPath)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Replay{}, store.ErrNotFound
	}
	if err != nil {
		return store.Replay{}, err
	}
	return r, nil
}

// RecordedSessions implements [store.Store].
func (db *DB) RecordedSessions(ctx context.Context, limit int) ([]store.RecordedSession, error) {
	if err := store.CheckRecordedLimit(limit); err != nil {
		return nil, err
	}
	var out []store.RecordedSession
	err := db.run(ctx, "store recorded sessions", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT `+sessionCols+`, recording_path
			FROM sessions JOIN replays ON replays.session_id = sessions.id
			WHERE status = 'ended' ORDER BY ended_at DESC, created_at DESC, id LIMIT $1`, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RecordedSession, error) {
			var rs store.RecordedSession
			var err error
			rs.Session, err = scanSession(row, &rs.RecordingPath)
			return rs, err
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
