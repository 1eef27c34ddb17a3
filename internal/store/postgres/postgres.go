package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tandem-sh/tandem/internal/store"
)

// DB is the shared [store.Store]: a pool of connections to one PostgreSQL
// database, which several tandem nodes may use at once.
type DB struct {
	pool *pgxpool.Pool
	// addr is the server as messages name it: host:port, or the socket.
	addr string
	// where is the URL without its password, for messages.
	where string
	// connectTimeout bounds one connection attempt.
	connectTimeout time.Duration
	// opTimeout bounds an operation whose ctx has no deadline (see run).
	opTimeout time.Duration
}

var _ store.Store = (*DB)(nil)

const (
	// connectTimeout bounds one connection attempt when the URL sets no
	// connect_timeout, so an unreachable server is reported in seconds.
	connectTimeout = 5 * time.Second
	// defaultOpTimeout bounds an operation whose ctx has no deadline:
	// waiting for a connection, for the audit lock, and for the answer.
	// Past it the database counts as unavailable.
	defaultOpTimeout = 10 * time.Second
)

// Advisory lock keys ("tandem" and a number), one database-wide lock each.
const (
	// auditLock serializes appends to the audit chain across every
	// process using the database.
	auditLock int64 = 0x74616e64656d0001
	// migrateLock serializes schema migrations of nodes starting at once.
	migrateLock int64 = 0x74616e64656d0002
)

// Open connects to the PostgreSQL database at url (postgres://… or
// postgresql://…, with any parameter libpq's URLs take; a password may also
// come from PGPASSWORD or ~/.pgpass) and brings its schema up to date under
// an advisory lock, so nodes starting together migrate once. It refuses a
// database whose schema is newer than this binary knows
// ([store.ErrSchemaTooNew]). A server that cannot be reached is reported
// within seconds, with an error matching [store.ErrUnavailable]. The pool
// holds up to pool_max_conns connections (a URL parameter; pgxpool's
// default is the greater of 4 and the number of CPUs).
func Open(ctx context.Context, url string) (*DB, error) {
	where := Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL URL %s: %w", where, err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "tandem"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: PostgreSQL %s: %w", where, err)
	}
	db := &DB{pool: pool, addr: serverAddr(cfg.ConnConfig.Config), where: where,
		connectTimeout: cfg.ConnConfig.ConnectTimeout, opTimeout: defaultOpTimeout}
	err = db.run(ctx, "store: connect to PostgreSQL", pool.Ping)
	if err == nil {
		err = db.migrate(ctx)
	}
	if err != nil {
		pool.Close()
		if ue := (*unavailableError)(nil); errors.As(err, &ue) {
			return nil, &openError{ue}
		}
		return nil, err
	}
	return db, nil
}

// openError is Open's error for a server it cannot reach: it names the
// server and asks whether PostgreSQL runs.
type openError struct{ err *unavailableError }

// Error names the server and the cause in one line.
func (e *openError) Error() string {
	return fmt.Sprintf("store: cannot reach PostgreSQL at %s: is PostgreSQL running? (%s)", e.err.addr, e.err.cause)
}

// Unwrap returns the unavailability, which matches [store.ErrUnavailable].
func (e *openError) Unwrap() error { return e.err }

// unavailableError is an error meaning the database cannot be reached or
// did not answer in time. It matches [store.ErrUnavailable] and wraps the
// driver's error, but says in one line what went wrong: the driver's
// message repeats itself for every address and TLS mode it tried.
type unavailableError struct {
	addr  string // the server
	cause string // what went wrong, briefly
	err   error
}

// Error says the store is unavailable, naming the server and the cause.
func (e *unavailableError) Error() string {
	return fmt.Sprintf("%v: PostgreSQL at %s: %s", store.ErrUnavailable, e.addr, e.cause)
}

// Unwrap returns [store.ErrUnavailable] and the driver's error.
func (e *unavailableError) Unwrap() []error {
	return []error{store.ErrUnavailable, store.ErrSharedUnavailable, e.err}
}

// serverAddr names the server a connection goes to: host:port, or the
// Unix socket file.
func serverAddr(c pgconn.Config) string {
	port := strconv.Itoa(int(c.Port))
	if strings.HasPrefix(c.Host, "/") {
		return c.Host + "/.s.PGSQL." + port
	}
	return net.JoinHostPort(c.Host, port)
}

// Redact returns a PostgreSQL URL without its password, for messages and
// logs. A string that is not a URL and may hold a password (a libpq
// keyword/value string, say) is elided entirely.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		if strings.Contains(strings.ToLower(s), "password") || err != nil {
			return "(redacted)"
		}
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Close closes every connection of the pool, waiting for those in use to
// be given back. Calls after Close fail.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// bound gives ctx the deadline db.opTimeout from now when it has none.
func (db *DB) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, db.opTimeout)
}

// run runs fn under a bounded ctx (see bound) and wraps its error with op,
// marking with [store.ErrUnavailable] those that mean the database cannot
// be reached or did not answer in time.
func (db *DB) run(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	bctx, cancel := db.bound(ctx)
	defer cancel()
	if err := fn(bctx); err != nil {
		return fmt.Errorf("%s: %w", op, db.classify(ctx, bctx, err))
	}
	return nil
}

// tx runs fn in one transaction, committed if fn returns nil, under run.
func (db *DB) tx(ctx context.Context, op string, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return db.run(ctx, op, func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// classify marks err with [store.ErrUnavailable] when the database could
// not be reached or did not answer before bctx, the bounded ctx, ran out.
// When the caller's own ctx ended, the error is the caller's: it is
// returned as it is.
func (db *DB) classify(ctx, bctx context.Context, err error) error {
	var oe *net.OpError
	switch {
	case ctx.Err() != nil:
		return err
	case bctx.Err() != nil:
		return &unavailableError{addr: db.addr, cause: fmt.Sprintf("no answer within %v (%v)", db.opTimeout, err), err: err}
	case !unreachable(err):
		return err
	case errors.As(err, &oe):
		return &unavailableError{addr: db.addr, cause: oe.Error(), err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &unavailableError{addr: db.addr, cause: fmt.Sprintf("no answer within %v", db.connectTimeout), err: err}
	}
	return &unavailableError{addr: db.addr, cause: err.Error(), err: err}
}

// unreachable says whether err means the server could not be reached or
// the connection broke, as opposed to an answer from a reachable server.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server answered. Only these answers mean it cannot serve
		// now: connection exceptions, shutdown, starting up, too many
		// connections. A refused password or a missing database is a
		// mistake to fix, not an outage to wait out.
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pe.Code, "08")
	}
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// utc returns t in UTC; pgx reads timestamptz in the local zone.
func utc(t time.Time) time.Time { return t.UTC() }

// utcPtr is utc for a nullable time: nil stays the zero time.
func utcPtr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
