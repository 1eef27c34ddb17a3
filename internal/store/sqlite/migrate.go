package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// migrationFS holds the schema, one file per version: NNNN_what.sql,
// numbered from 0001 without gaps. A released file is never edited; a
// change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrate applies the migrations the database lacks, all in one write
// transaction, so two processes starting at once apply each exactly once
// and a failure leaves the schema as it was.
func (s *DB) migrate(ctx context.Context) error {
	ms, err := store.ParseMigrations(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("store migrate: %w", err)
	}
	return s.write(ctx, "store migrate", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		) STRICT`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return &store.SchemaError{Path: s.path, Found: have, Known: len(ms)}
		}
		now := fmtTime(time.Now())
		for _, m := range ms[have:] {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("apply %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, now); err != nil {
				return fmt.Errorf("record %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// SchemaVersion reports the database's schema version, for diagnostics.
func (s *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("store schema version: %w", err)
	}
	return v, nil
}
