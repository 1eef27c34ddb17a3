package sqlite_test

import (
	"context"
	"testing"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
	"github.com/tandem-sh/tandem/internal/store/storetest"
)

// TestConformance runs the store conformance suite on SQLite, each test on
// a data dir of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		NewDB: func(t *testing.T) string { return t.TempDir() },
		Open: func(ctx context.Context, dir string) (store.Store, error) {
			db, err := sqlite.Open(ctx, dir)
			if err != nil {
				return nil, err // not a nil *DB in a non-nil interface
			}
			return db, nil
		},
	})
}
