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
	const latest = 7 // migrations/0007_command_connections.sql
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

// TestMigrateSessionActor: a data dir written by the version before the
// directory knew actors is migrated in place; its rows read back with no
// actor, and each actor then finds only its own.
func TestMigrateSessionActor(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	mustNil(t, os.MkdirAll(dir, 0o700))
	db := rawDB(t, dir)
	_, err := db.Exec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`)
	mustNil(t, err)
	files, err := filepath.Glob("migrations/000[1-5]_*.sql")
	mustNil(t, err)
	for i, f := range files {
		sql, err := os.ReadFile(f)
		mustNil(t, err)
		_, err = db.Exec(string(sql))
		mustNil(t, err)
		_, err = db.Exec(`INSERT INTO schema_version VALUES (?, ?, '')`, i+1, filepath.Base(f))
		mustNil(t, err)
	}
	st := openStore(t, dir)
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "a", PID: 1, Host: "h", StartedAt: t0}))
	_, err = db.Exec(`INSERT INTO sessions (id, name, tenant, owner, instance_id, target, kind, host, port, username, token_hash, status, created_at)
		VALUES ('old', 'dev', 't', 'sid:1', 'a', 'x', 'local', '', 0, '', zeroblob(32), 'active', '2026-03-01T11:00:00.123456789Z')`)
	mustNil(t, err)
	if v, err := st.SchemaVersion(ctx); err != nil || v != 7 {
		t.Fatalf("schema version after migrating = %d, %v; want 7", v, err)
	}
	if old, err := st.Session(ctx, "old"); err != nil || old.Actor != "" || old.Owner != "sid:1" {
		t.Fatalf("the session written before = %+v, %v", old, err)
	}
	mustNil(t, st.CreateSession(ctx, store.SessionRow{ID: "alice1", Name: "dev", Tenant: "t", Actor: "alice", Owner: "sid:1",
		InstanceID: "a", Target: "x", Kind: "local", TokenHash: make([]byte, 32), CreatedAt: t0}))
	for actor, want := range map[string]string{"alice": "alice1", "": "old", "bob": ""} {
		got, err := st.ActiveSession(ctx, "t", actor, "sid:1", "dev")
		if got.ID != want || (want == "" && !errors.Is(err, store.ErrNotFound)) {
			t.Errorf("ActiveSession(actor %q) = %s, %v; want %q", actor, got.ID, err, want)
		}
	}
}
