package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
)

// migrationFS holds the schema, one file per version: NNNN_what.sql,
// numbered from 0001 without gaps. A released file is never edited; a
// change is a new file. The numbering is PostgreSQL's own, apart from
// SQLite's.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies the migrations the database lacks in one transaction
// that first takes an advisory lock, so that nodes starting at once apply
// each exactly once (the others wait, then find nothing to do), and a
// failure leaves the schema as it was: PostgreSQL's DDL is transactional.
func (db *DB) migrate(ctx context.Context) error {
	ms, err := store.ParseMigrations(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("store migrate: %w", err)
	}
	return db.tx(ctx, "store migrate", func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL
		)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return &store.SchemaError{Path: db.where, Found: have, Known: len(ms), Flag: "--store"}
		}
		now := time.Now()
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, now); err != nil {
				return fmt.Errorf("record %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// SchemaVersion reports the database's schema version, for diagnostics.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.run(ctx, "store schema version", func(ctx context.Context) error {
		return db.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v)
	})
	return v, err
}
