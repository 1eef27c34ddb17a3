package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	modernc "modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tandem-sh/tandem/internal/store"
)

// FileName is the database file inside the data dir.
const FileName = "tandem.db"

// DB is the embedded [store.Store]: one WAL-mode database file shared by
// every tandem process on the data dir.
type DB struct {
	path string
	// db serves reads from a pool of connections; WAL lets them run
	// alongside a writer.
	db *sql.DB
	// wdb is the one connection writes go through, so this process's
	// writers queue in database/sql, honouring their ctx; other processes
	// are met at the file lock (see begin).
	wdb *sql.DB
	// The statements every tool call runs, prepared once on wdb: parsing
	// them again each time cost more than running them.
	auditHead, auditInsert, commandInsert *sql.Stmt
}

var _ store.Store = (*DB)(nil)

// Writers wait for another process's write transaction for up to
// lockWait in all, in slices of lockSliceMs, so that a cancelled ctx ends
// the wait: SQLite's own busy wait does not notice it.
const (
	lockWait    = 10 * time.Second
	lockSliceMs = 50
)

// Open opens (creating if needed) dir/tandem.db, with dir created 0700, and
// brings its schema up to date. It refuses a database whose schema is newer
// than this binary knows ([store.ErrSchemaTooNew]).
func Open(ctx context.Context, dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store open: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := sql.Open("sqlite", dsn(path, int(lockWait/time.Millisecond)))
	if err != nil {
		return nil, fmt.Errorf("store open %s: %w", path, err)
	}
	wdb, err := sql.Open("sqlite", dsn(path, lockSliceMs))
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	s := &DB{path: path, db: db, wdb: wdb}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// dsn is the connection string of every connection.
//
//   - busy_timeout: a reader waits up to 10 s (busyMs) for a lock instead
//     of failing at once; a writer waits lockSliceMs at a time and begin
//     retries up to 10 s in all.
//   - journal_mode(WAL): readers never block the writer and vice versa, and
//     several processes can share the file.
//   - foreign_keys(1): sessions need their instance, commands their session.
//   - synchronous(NORMAL): in WAL mode a commit is written to the WAL (the
//     OS page cache) before it returns, without an fsync. A committed
//     transaction therefore survives the process being killed, kill -9
//     included; only an OS crash or power loss can lose the last commits,
//     and it never corrupts the file.
//   - _txlock=immediate: every write transaction begins with BEGIN
//     IMMEDIATE, taking the write lock up front, so a read-then-write
//     cannot be overtaken by another process between its read and its write.
func dsn(path string, busyMs int) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyMs))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// prepare prepares the statements of the write path.
func (s *DB) prepare(ctx context.Context) error {
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&s.auditHead, auditHeadSQL},
		{&s.auditInsert, auditInsertSQL},
		{&s.commandInsert, commandInsertSQL},
	} {
		st, err := s.wdb.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("store open %s: prepare: %w", s.path, unavailable(err))
		}
		*p.st = st
	}
	return nil
}

// Close closes the database.
func (s *DB) Close() error {
	for _, st := range []*sql.Stmt{s.auditHead, s.auditInsert, s.commandInsert} {
		if st != nil {
			_ = st.Close()
		}
	}
	if err := errors.Join(s.wdb.Close(), s.db.Close()); err != nil {
		return fmt.Errorf("store close: %w", err)
	}
	return nil
}

// write runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
// Errors are wrapped with op.
func (s *DB) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("%s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", op, err)
	}
	return nil
}

// Writable takes the write lock (BEGIN IMMEDIATE) and gives it back, so a
// caller learns, within ctx, whether a write would get through.
func (s *DB) Writable(ctx context.Context) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: write lock: %w", err)
	}
	return tx.Rollback()
}

// begin starts a write transaction, retrying while another process holds
// the write lock, until lockWait has passed or ctx is done.
func (s *DB) begin(ctx context.Context) (*sql.Tx, error) {
	deadline := time.Now().Add(lockWait)
	for {
		tx, err := s.wdb.BeginTx(ctx, nil)
		if err == nil {
			return tx, nil
		}
		if !isBusy(err) {
			return nil, unavailable(err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: another process has held the write lock for %v: %w", store.ErrUnavailable, lockWait, err)
		}
	}
}

func isBusy(err error) bool {
	var se *modernc.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// unavailable marks err with [store.ErrUnavailable] when it says the file
// cannot be opened at all (SQLITE_CANTOPEN: a missing or unreadable
// directory, say); other errors are returned as they are.
func unavailable(err error) error {
	var se *modernc.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// timeLayout is RFC 3339 with a fixed nine-digit fraction: it sorts as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

func parseNullTime(s sql.NullString) (time.Time, error) {
	if !s.Valid {
		return time.Time{}, nil
	}
	return parseTime(s.String)
}

func nullInt(p *int) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*p), Valid: true}
}

func intPtr(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	v := int(n.Int64)
	return &v
}
