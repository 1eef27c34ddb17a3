package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tandem-sh/tandem/internal/store"
)

// AddReplay implements [store.Store].
func (s *DB) AddReplay(ctx context.Context, sessionID string, keyHash []byte, recordingPath string) error {
	if len(keyHash) != 32 {
		return fmt.Errorf("store add replay: key hash is %d bytes, want 32 (SHA-256)", len(keyHash))
	}
	return s.write(ctx, "store add replay", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO replays (session_id, monitor_key_hash, recording_path) VALUES (?, ?, ?)`,
			sessionID, keyHash, recordingPath)
		return err
	})
}

// FindReplay implements [store.Store].
func (s *DB) FindReplay(ctx context.Context, keyHash []byte) (store.Replay, error) {
	return s.replay(ctx, "store find replay", "r.monitor_key_hash = ?", keyHash)
}

// ReplayOf implements [store.Store].
func (s *DB) ReplayOf(ctx context.Context, sessionID string) (store.Replay, error) {
	return s.replay(ctx, "store replay of a session", "r.session_id = ?", sessionID)
}

// replay finds the one replay that where (a condition on replays r, with
// one parameter) picks, with its session's name and status.
func (s *DB) replay(ctx context.Context, op, where string, arg any) (store.Replay, error) {
	var r store.Replay
	err := s.db.QueryRowContext(ctx, `SELECT s.id, s.name, s.status, r.recording_path
		FROM replays r JOIN sessions s ON s.id = r.session_id WHERE `+where, arg).
		Scan(&r.SessionID, &r.Name, &r.Status, &r.RecordingPath)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Replay{}, store.ErrNotFound
	}
	if err != nil {
		return store.Replay{}, fmt.Errorf("%s: %w", op, err)
	}
	return r, nil
}

// RecordedSessions implements [store.Store].
func (s *DB) RecordedSessions(ctx context.Context, limit int) ([]store.RecordedSession, error) {
	if err := store.CheckRecordedLimit(limit); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+sessionCols+`, recording_path
		FROM sessions JOIN replays ON replays.session_id = sessions.id
		WHERE status = 'ended' ORDER BY ended_at DESC, created_at DESC, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store recorded sessions: %w", err)
	}
	defer rows.Close()
	var out []store.RecordedSession
	for rows.Next() {
		var rs store.RecordedSession
		if rs.Session, err = scanSession(rows, &rs.RecordingPath); err != nil {
			return nil, fmt.Errorf("store recorded sessions: %w", err)
		}
		out = append(out, rs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store recorded sessions: %w", err)
	}
	return out, nil
}
