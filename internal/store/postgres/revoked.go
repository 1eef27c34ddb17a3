package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Revoke implements [store.Store].
func (db *DB) Revoke(ctx context.Context, jti string, expires time.Time) error {
	if jti == "" {
		return fmt.Errorf("store revoke: empty jti")
	}
	return db.tx(ctx, "store revoke", func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO revoked_tokens (jti, expires_at, revoked_at) VALUES ($1, $2, $3)
			ON CONFLICT (jti) DO NOTHING`, jti, expires, time.Now())
		if err != nil {
			return err
		}
		return notify(ctx, tx, ChannelRevoked, jti)
	})
}

// RevokedJTIs implements [store.Store].
func (db *DB) RevokedJTIs(ctx context.Context) ([]string, error) {
	var out []string
	err := db.run(ctx, "store revoked tokens", func(ctx context.Context) error {
		rows, err := db.pool.Query(ctx, `SELECT jti FROM revoked_tokens WHERE expires_at > $1`, time.Now())
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
