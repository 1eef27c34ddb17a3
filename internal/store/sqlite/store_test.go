package sqlite_test

import (
	"context"
	"crypto/sha256"
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
	const latest = 4 // migrations/0004_approvals.sql
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

func TestStoreInstances(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	for _, in := range []store.Instance{
		{ID: "old", PID: 10, Host: "a", StartedAt: t0},
		{ID: "live", PID: 11, Host: "a", StartedAt: t0},
		{ID: "ended", PID: 12, Host: "b", StartedAt: t0},
	} {
		if err := st.RegisterInstance(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RegisterInstance(ctx, store.Instance{ID: "old", StartedAt: t0}); err == nil {
		t.Fatal("registering an existing id succeeded")
	}
	mustNil(t, st.Heartbeat(ctx, "live", t0.Add(time.Minute)))
	mustNil(t, st.EndInstance(ctx, "ended", t0.Add(time.Second)))
	mustNil(t, st.EndInstance(ctx, "ended", t0.Add(time.Hour))) // twice: no-op

	dead, err := st.DeadInstances(ctx, t0.Add(30*time.Second))
	mustNil(t, err)
	if len(dead) != 1 || dead[0].ID != "old" || dead[0].PID != 10 || dead[0].Host != "a" ||
		!dead[0].StartedAt.Equal(t0) || !dead[0].HeartbeatAt.Equal(t0) || !dead[0].EndedAt.IsZero() {
		t.Fatalf("dead = %+v; want only old", dead)
	}
	if dead, _ := st.DeadInstances(ctx, t0); len(dead) != 0 {
		t.Fatalf("heartbeat exactly at staleBefore counted dead: %+v", dead)
	}

	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"heartbeat unknown", st.Heartbeat(ctx, "nope", t0), store.ErrNotFound},
		{"heartbeat ended", st.Heartbeat(ctx, "ended", t0), store.ErrInstanceEnded},
		{"end unknown", st.EndInstance(ctx, "nope", t0), store.ErrNotFound},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v; want %v", tc.name, tc.err, tc.want)
		}
	}
}

func session(id, name, instance string, created time.Time) store.SessionRow {
	h := sha256.Sum256([]byte("token-" + id))
	return store.SessionRow{
		ID: id, Name: name, Tenant: "default", Owner: "conn-" + instance, InstanceID: instance,
		Target: "local", Kind: "local", Host: "localhost", Port: 0, Username: "u",
		TokenHash: h[:], CreatedAt: created,
	}
}

func TestStoreSessions(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	for _, id := range []string{"dead", "alive"} {
		mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: id, PID: 1, Host: "h", StartedAt: t0}))
	}
	rows := []store.SessionRow{
		session("s1", "dev", "dead", t0),
		session("s2", "ops", "dead", t0.Add(time.Second)),
		session("s3", "dev", "alive", t0.Add(2*time.Second)),
		session("s4", "dev", "dead", t0.Add(3*time.Second)),
	}
	for _, r := range rows {
		mustNil(t, st.CreateSession(ctx, r))
	}

	bad := session("s5", "x", "dead", t0)
	bad.TokenHash = []byte("short")
	noInstance := session("s6", "x", "ghost", t0)
	for name, err := range map[string]error{
		"short token hash": st.CreateSession(ctx, bad),
		"unknown instance": st.CreateSession(ctx, noInstance),
		"duplicate id":     st.CreateSession(ctx, rows[0]),
	} {
		if err == nil {
			t.Errorf("%s: create succeeded", name)
		}
	}

	active, err := st.ActiveSessions(ctx)
	mustNil(t, err)
	if ids(active) != "s1 s2 s3 s4" {
		t.Fatalf("active = %s", ids(active))
	}
	if got := active[0]; got.Status != store.StatusActive || !got.CreatedAt.Equal(t0) ||
		string(got.TokenHash) != string(rows[0].TokenHash) || got.Owner != "conn-dead" || !got.EndedAt.IsZero() {
		t.Fatalf("active[0] = %+v", got)
	}

	// s4 ends by disconnect first; a later end keeps the first reason.
	mustNil(t, st.EndSession(ctx, "s4", "disconnect", t0.Add(time.Minute)))
	mustNil(t, st.EndSession(ctx, "s4", "lease_expired", t0.Add(time.Hour)))
	if err := st.EndSession(ctx, "nope", "x", t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("end unknown session: %v", err)
	}

	// The dead instance's remaining sessions end once, whoever reaps it.
	ended, err := st.EndSessionsOf(ctx, "dead", "server_restart", t0.Add(2*time.Minute))
	mustNil(t, err)
	if ids(ended) != "s1 s2" || ended[0].Status != store.StatusEnded || ended[0].EndReason != "server_restart" ||
		!ended[0].EndedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("EndSessionsOf = %+v", ended)
	}
	again, err := st.EndSessionsOf(ctx, "dead", "server_restart", t0.Add(3*time.Minute))
	mustNil(t, err)
	if len(again) != 0 {
		t.Fatalf("second EndSessionsOf ended %s", ids(again))
	}

	active, _ = st.ActiveSessions(ctx)
	if ids(active) != "s3" {
		t.Fatalf("active after reaping = %s; want s3 (the live instance's)", ids(active))
	}
	for _, tc := range []struct{ tenant, name, want string }{
		{"default", "dev", "s1 s4"}, // s1 ended later than s4
		{"default", "ops", "s2"},
		{"other", "dev", ""},
		{"default", "none", ""},
	} {
		got, err := st.FindEnded(ctx, tc.tenant, tc.name)
		mustNil(t, err)
		if ids(got) != tc.want {
			t.Errorf("FindEnded(%s, %s) = %q; want %q", tc.tenant, tc.name, ids(got), tc.want)
		}
	}
	ops, _ := st.FindEnded(ctx, "default", "ops")
	if ops[0].EndReason != "server_restart" {
		t.Fatalf("s2 reason = %q", ops[0].EndReason)
	}
	dev, _ := st.FindEnded(ctx, "default", "dev")
	if dev[1].EndReason != "disconnect" || !dev[1].EndedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("s4 = %+v; want its first end kept", dev[1])
	}
}

func TestStoreCommands(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i", StartedAt: t0}))
	mustNil(t, st.CreateSession(ctx, session("s", "dev", "i", t0)))
	zero, one := 0, 1
	cmds := []store.CommandRow{
		{ID: "c1", SessionID: "s", Source: store.SourceAgent, Command: "ls -la", Cwd: "/w", ExitCode: &zero,
			StartedAt: t0, DurationMs: 12, StdoutBytes: 100, StderrBytes: 0, StdoutPath: "/spool/c1.out", StderrPath: "/spool/c1.err"},
		{ID: "c2", SessionID: "s", Source: store.SourceUser, Command: "false", Cwd: "/w", ExitCode: &one,
			StartedAt: t0.Add(time.Second), DurationMs: 1},
		{ID: "c3", SessionID: "s", Source: store.SourceAgent, Command: "sleep 1000", Cwd: "/w",
			StartedAt: t0.Add(2 * time.Second)}, // never finished: no exit code
	}
	for _, c := range []store.CommandRow{cmds[2], cmds[0], cmds[1]} { // insertion order does not matter
		mustNil(t, st.AddCommand(ctx, c))
	}
	for name, c := range map[string]store.CommandRow{
		"unknown session": {ID: "c9", SessionID: "nope", Source: store.SourceAgent, StartedAt: t0},
		"bad source":      {ID: "c9", SessionID: "s", Source: "robot", StartedAt: t0},
		"duplicate id":    cmds[0],
	} {
		if err := st.AddCommand(ctx, c); err == nil {
			t.Errorf("%s: AddCommand succeeded", name)
		}
	}
	got, err := st.Commands(ctx, "s")
	mustNil(t, err)
	if len(got) != 3 {
		t.Fatalf("commands = %+v", got)
	}
	for i, want := range cmds {
		g := got[i]
		if g.ID != want.ID || g.Source != want.Source || g.Command != want.Command || g.Cwd != want.Cwd ||
			!g.StartedAt.Equal(want.StartedAt) || g.DurationMs != want.DurationMs || g.StdoutBytes != want.StdoutBytes ||
			g.StdoutPath != want.StdoutPath || g.StderrPath != want.StderrPath || !sameInt(g.ExitCode, want.ExitCode) {
			t.Errorf("command %d = %+v; want %+v", i, g, want)
		}
	}
	if none, err := st.Commands(ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("commands of unknown session = %v, %v", none, err)
	}
}

func sameInt(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func ids(rs []store.SessionRow) string {
	s := ""
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += r.ID
	}
	return s
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoreReplays(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i", PID: 1, Host: "h", StartedAt: t0}))
	mustNil(t, st.CreateSession(ctx, session("s1", "dev", "i", t0)))
	key := sha256.Sum256([]byte("monitor-key"))
	mustNil(t, st.AddReplay(ctx, "s1", key[:], "/data/recordings/s1.cast"))
	r, err := st.FindReplay(ctx, key[:])
	if err != nil || r.Name != "dev" || r.Status != store.StatusActive || r.RecordingPath != "/data/recordings/s1.cast" {
		t.Fatalf("find replay: %+v %v", r, err)
	}
	mustNil(t, st.EndSession(ctx, "s1", "disconnected", t0.Add(time.Minute)))
	if r, _ := st.FindReplay(ctx, key[:]); r.Status != store.StatusEnded {
		t.Errorf("after end: %+v", r)
	}
	other := sha256.Sum256([]byte("other"))
	if _, err := st.FindReplay(ctx, other[:]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown key: %v", err)
	}
	if err := st.AddReplay(ctx, "s1", []byte("short"), "x"); err == nil {
		t.Error("a short key hash was accepted")
	}
	if err := st.AddReplay(ctx, "nope", other[:], "x"); err == nil {
		t.Error("a replay for an unknown session was accepted")
	}
}

func TestRevokedSharedAcrossHandles(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir()
	a, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := a.Revoke(ctx, "live", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, "live", time.Now().Add(2*time.Hour)); err != nil {
		t.Fatalf("second revoke of the same jti: %v", err)
	}
	if err := a.Revoke(ctx, "gone", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := b.RevokedJTIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "live" {
		t.Fatalf("revoked = %v, want [live] (an expired token needs no entry)", got)
	}
	if err := a.Revoke(ctx, "", time.Now()); err == nil {
		t.Fatal("empty jti accepted")
	}
}

func TestApprovalsOfAGoneInstance(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	for _, r := range []store.ApprovalRow{
		{ID: "a1", InstanceID: "gone", Tenant: "t", Command: "rm -rf x", CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{ID: "a2", InstanceID: "gone", Tenant: "t", Command: "ls", CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{ID: "a3", InstanceID: "alive", Tenant: "t", Command: "ls", CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
	} {
		if err := st.AddApproval(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DecideApproval(ctx, "a2", "approved", "dashboard", "", now); err != nil {
		t.Fatal(err)
	}
	got, err := st.DenyApprovalsOf(ctx, "gone", "restart", "server_restart", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "a1" || got[0].Command != "rm -rf x" {
		t.Fatalf("denied %+v, want only the pending a1", got)
	}
	if again, _ := st.DenyApprovalsOf(ctx, "gone", "restart", "server_restart", now); len(again) != 0 {
		t.Errorf("denied twice: %+v", again)
	}
}
