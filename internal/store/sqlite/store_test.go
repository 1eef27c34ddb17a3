package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// openStore opens a store on dir (a fresh temp dir when empty) and closes
// it at cleanup.
func openStore(t testing.TB, dir string) *sqlite.DB {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// rawDB opens the database file directly, the way a person with the file
// (or a test tampering with it) would.
func rawDB(t testing.TB, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// t0 is a fixed instant with nanoseconds and a non-UTC zone, to check that
// times come back equal.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))

func TestStoreMigrations(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state", "tandem")

	// Several handles opening a new data dir at once apply the schema once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			st, err := sqlite.Open(ctx, dir)
			if err == nil {
				err = st.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v, mode %v; want 0700", err, fi.Mode().Perm())
	}

	// Reopening applies nothing and keeps the data.
	st := openStore(t, dir)
	if err := st.RegisterInstance(ctx, store.Instance{ID: "i1", PID: 1, Host: "h", StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, dir)
	const latest = 5 // migrations/0005_cluster.sql
	if v, err := st.SchemaVersion(ctx); err != nil || v != latest {
		t.Fatalf("schema version = %d, %v; want %d", v, err, latest)
	}
	var rows int
	if err := rawDB(t, dir).QueryRow(`SELECT count(*) FROM schema_version`).Scan(&rows); err != nil || rows != latest {
		t.Fatalf("schema_version rows = %d, %v; want %d", rows, err, latest)
	}
	if dead, err := st.DeadInstances(ctx, t0.Add(time.Hour)); err != nil || len(dead) != 1 {
		t.Fatalf("after reopen: dead = %v, %v; want instance i1", dead, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// A database from a newer tandem is refused, and left alone.
	if _, err := rawDB(t, dir).Exec(`INSERT INTO schema_version VALUES (99, '0099_future.sql', '')`); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(ctx, dir)
	var se *store.SchemaError
	if !errors.Is(err, store.ErrSchemaTooNew) || !errors.As(err, &se) || se.Found != 99 || se.Known != latest {
		t.Fatalf("open newer db: err = %v; want SchemaError 99 > %d", err, latest)
	}
	t.Log(err)
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
