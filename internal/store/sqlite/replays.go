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
	var r store.Replay
	err := s.db.QueryRowContext(ctx, `SELECT s.id, s.name, s.status, r.recording_path
		FROM replays r JOIN sessions s ON s.id = r.session_id WHERE r.monitor_key_hash = ?`, keyHash).
		Scan(&r.SessionID, &r.Name, &r.Status, &r.RecordingPath)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Replay{}, store.ErrNotFound
	}
	if err != nil {
		return store.Replay{}, fmt.Errorf("store find replay: %w", err)
	}
	return r, nil
}
