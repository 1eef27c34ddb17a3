package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Revoke implements [store.Store].
func (s *DB) Revoke(ctx context.Context, jti string, expires time.Time) error {
	if jti == "" {
		return fmt.Errorf("store revoke: empty jti")
	}
	return s.write(ctx, "store revoke", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES (?, ?, ?)
			ON CONFLICT (jti) DO NOTHING`, jti, fmtTime(expires), fmtTime(time.Now()))
		return err
	})
}

// RevokedJTIs implements [store.Store].
func (s *DB) RevokedJTIs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT jti FROM revoked_tokens WHERE expires_at > ?`, fmtTime(time.Now()))
	if err != nil {
		return nil, fmt.Errorf("store revoked tokens: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var j string
		if err := rows.Scan(&j); err != nil {
			return nil, fmt.Errorf("store revoked tokens: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store revoked tokens: %w", err)
	}
	return out, nil
}
