package postgres_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/store/storetest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// childEnv switches the test binary into a child process appending to the
// database it names, so a test can run a real second process.
const childEnv = "TANDEM_PG_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		os.Exit(child(spec))
	}
	os.Exit(testenv.PostgresMain(m))
}

// open opens a handle on url, closed at t's cleanup.
func open(t testing.TB, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// raw connects to url directly, as a person with psql would.
func raw(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	return conn
}

// TestConformance runs the store conformance suite on PostgreSQL, each
// test on a database of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		NewDB: func(t *testing.T) string { return testenv.Postgres(t) },
		Open: func(ctx context.Context, url string) (store.Store, error) {
			db, err := postgres.Open(ctx, url)
			if err != nil {
				return nil, err // not a nil *DB in a non-nil interface
			}
			return db, nil
		},
	})
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	db := open(t, url)
	const latest = 4 // migrations/0004_command_connections.sql
	if v, err := db.SchemaVersion(ctx); err != nil || v != latest {
		t.Fatalf("schema version = %d, %v; want %d", v, err, latest)
	}
	mustNil(t, db.Close())
	open(t, url).Close() // reopening applies nothing
	conn := raw(t, url)
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM schema_version`).Scan(&rows); err != nil || rows != latest {
		t.Fatalf("schema_version rows = %d, %v; want %d", rows, err, latest)
	}

	// A database from a newer tandem is refused, and left alone.
	if _, err := conn.Exec(ctx, `INSERT INTO schema_version VALUES (99, '0099_future.sql', now())`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(ctx, strings.Replace(url, "postgres@", "postgres:secret@", 1))
	var se *store.SchemaError
	if !errors.Is(err, store.ErrSchemaTooNew) || !errors.As(err, &se) || se.Found != 99 || se.Known != latest ||
		!strings.Contains(err.Error(), "--store") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("open newer db: err = %v; want SchemaError 99 > %d naming --store, without the password", err, latest)
	}
	t.Log(err)
}

// TestAuditAppendOnly: tandem's own SQL cannot change history, the
// triggers refuse.
func TestAuditAppendOnly(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	db := open(t, url)
	for i := range 3 {
		if _, err := db.AppendAudit(ctx, func(h store.AuditHead) (store.AuditRecord, error) {
			return store.AuditRecord{Seq: h.Seq + 1, Time: time.Now(), Event: "e", Hash: strconv.Itoa(i)}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	conn := raw(t, url)
	for _, q := range []string{`UPDATE audit SET outcome = 'x' WHERE seq = 2`, `DELETE FROM audit WHERE seq = 3`, `TRUNCATE audit`} {
		if _, err := conn.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v; want refused as append-only", q, err)
		}
	}
}

// TestAuditTwoProcesses runs a real second process appending to the same
// database while this one appends: one chain, no gap, no fork.
func TestAuditTwoProcesses(t *testing.T) {
	const n = 200
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testenv.Postgres(t)
	db := open(t, url)

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", childEnv, url, n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	mustNil(t, err)
	stdout, err := cmd.StdoutPipe()
	mustNil(t, err)
	mustNil(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child: %q, %v; stderr: %s", line, err, stderr.String())
	}
	_, err = stdin.Write([]byte("go\n"))
	mustNil(t, err)
	for i := range n {
		if _, err := db.AppendAudit(ctx, link("parent", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v; stderr: %s", err, stderr.String())
	}

	var prev store.AuditRecord
	seen, switches := map[string]bool{}, 0
	mustNil(t, db.ScanAudit(ctx, func(r store.AuditRecord) error {
		switch {
		case r.Seq != prev.Seq+1:
			return fmt.Errorf("seq %d after %d", r.Seq, prev.Seq)
		case r.PrevHash != prev.Hash:
			return fmt.Errorf("record %d links to %q, not to record %d (%q): a fork", r.Seq, r.PrevHash, prev.Seq, prev.Hash)
		case seen[r.Hash]:
			return fmt.Errorf("record %q twice", r.Hash)
		}
		if prev.Actor != "" && r.Actor != prev.Actor {
			switches++
		}
		seen[r.Hash] = true
		prev = r
		return nil
	}))
	if prev.Seq != 2*n {
		t.Fatalf("chain of %d records; want %d", prev.Seq, 2*n)
	}
	t.Logf("%d records from two processes, writer changed %d times along the chain", 2*n, switches)
}

// link chains a record of actor onto the head; its hash names it.
func link(actor string, i int) func(store.AuditHead) (store.AuditRecord, error) {
	return func(h store.AuditHead) (store.AuditRecord, error) {
		return store.AuditRecord{Seq: h.Seq + 1, Time: time.Now(), Event: "tool_call", Actor: actor,
			PrevHash: h.Hash, Hash: fmt.Sprintf("%s-%d", actor, i)}, nil
	}
}

// child runs in the child process: spec is "URL N". It prints "ready",
// waits for a line on stdin, then appends N records as actor "child".
func child(spec string) int {
	var (
		url string
		n   int
	)
	if _, err := fmt.Sscan(spec, &url, &n); err != nil {
		fmt.Fprintln(os.Stderr, "child spec:", err)
		return 2
	}
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "child start:", err)
		return 1
	}
	for i := range n {
		if _, err := db.AppendAudit(ctx, link("child", i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// TestAuditLockWaitBounded holds the audit lock from another connection,
// as another node mid-append would: an append waits for it, one without a
// deadline gives up (unavailable) rather than hang, and one whose own ctx
// ends gets its ctx's error.
func TestAuditLockWaitBounded(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	db := open(t, url)
	postgres.SetOpTimeout(db, 500*time.Millisecond)
	conn := raw(t, url)
	tx, err := conn.Begin(ctx)
	mustNil(t, err)
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(0x74616e64656d0001))
	mustNil(t, err)

	start := time.Now()
	_, err = db.AppendAudit(ctx, link("a", 0))
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("append under a held lock, no deadline: %v after %v; want unavailable after the op timeout", err, time.Since(start))
	}
	t.Log(err)
	if err := db.Writable(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("writable under a held lock: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err = db.AppendAudit(short, link("a", 0)); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("append under a held lock with a 200ms ctx: %v; want the ctx's deadline, not unavailable", err)
	}

	postgres.SetOpTimeout(db, 10*time.Second)
	released := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { _ = tx.Rollback(ctx); close(released) })
	start = time.Now()
	rec, err := db.AppendAudit(ctx, link("a", 1))
	<-released // the connection is the test's again, for its cleanup
	if err != nil || rec.Seq != 1 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("append after the lock is released: %+v, %v after %v", rec, err, time.Since(start))
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"postgresql://h/db?password=secret&x=1":         "postgresql://h/db?password=xxxxx&x=1",
		"host=h password=secret":                        "(redacted)",
		"mysql://h/db":                                  "mysql://h/db",
		"sqlite":                                        "sqlite",
	} {
		if got := postgres.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q; want %q", in, got, want)
		}
	}
}

func mustNil(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrateSessionActor: a store written by the version before the
// directory knew actors is migrated in place. Its rows read back with no
// actor; each actor then has its own names, and one actor's are unique.
func TestMigrateSessionActor(t *testing.T) {
	ctx := context.Background()
	url := testenv.Postgres(t)
	conn := raw(t, url)
	_, err := conn.Exec(ctx, `CREATE TABLE schema_version (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)`)
	mustNil(t, err)
	for i, f := range []string{"0001_init.sql", "0002_cluster.sql"} {
		sql, err := os.ReadFile("migrations/" + f)
		mustNil(t, err)
		_, err = conn.Exec(ctx, string(sql))
		mustNil(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO schema_version VALUES ($1, $2, now())`, i+1, f)
		mustNil(t, err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO instances (id, pid, host, started_at, heartbeat_at, url) VALUES ('a', 1, 'h', now(), now(), '')`)
	mustNil(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO sessions (id, name, tenant, owner, instance_id, target, kind, host, port, username, token_hash, status, created_at)
		VALUES ('old', 'dev', 't', 'sid:1', 'a', 'x', 'local', '', 0, '', $1, 'active', now())`, make([]byte, 32))
	mustNil(t, err)

	db := open(t, url)
	if v, err := db.SchemaVersion(ctx); err != nil || v != 4 {
		t.Fatalf("schema version after migrating = %d, %v; want 4", v, err)
	}
	if old, err := db.Session(ctx, "old"); err != nil || old.Actor != "" || old.Owner != "sid:1" || old.Status != store.StatusActive {
		t.Fatalf("the session written before = %+v, %v", old, err)
	}
	row := func(id, actor string) store.SessionRow {
		return store.SessionRow{ID: id, Name: "dev", Tenant: "t", Actor: actor, Owner: "sid:1", InstanceID: "a",
			Target: "x", Kind: "local", TokenHash: make([]byte, 32), CreatedAt: time.Now()}
	}
	mustNil(t, db.CreateSession(ctx, row("alice1", "alice")))
	mustNil(t, db.CreateSession(ctx, row("bob1", "bob")))
	if err := db.CreateSession(ctx, row("alice2", "alice")); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("alice's second active dev: %v; want ErrNameTaken", err)
	}
	for actor, want := range map[string]string{"alice": "alice1", "bob": "bob1", "": "old"} {
		if got, err := db.ActiveSession(ctx, "t", actor, "sid:1", "dev"); err != nil || got.ID != want {
			t.Errorf("ActiveSession(actor %q) = %s, %v; want %s", actor, got.ID, err, want)
		}
	}
}
