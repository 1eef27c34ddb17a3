package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresEnv names an existing PostgreSQL server for the tests, as a URL
// whose user may create databases (postgres://user@host:port/postgres).
// When it is set, [Postgres] creates its databases there instead of
// starting a throwaway cluster.
const PostgresEnv = "TANDEM_TEST_POSTGRES"

// pg is the throwaway cluster of this test binary, started by the first
// [Postgres] call and stopped by [PostgresMain]. It is the one piece of
// package state here: a cluster per test binary, not per test, because
// initdb takes seconds.
var pg struct {
	once    sync.Once
	main    atomic.Bool // PostgresMain is running the tests
	cluster *pgCluster  // nil when PostgresEnv is used, or before the start
	admin   string      // URL of the maintenance database
	skip    string      // why PostgreSQL is missing; "" when present
	err     error       // why it did not start
	n       atomic.Int64
}

// PostgresMain runs a test binary whose tests call [Postgres] and stops
// the throwaway cluster once they are done, with every process it started.
// Call it from TestMain: os.Exit(testenv.PostgresMain(m)).
func PostgresMain(m *testing.M) int {
	pg.main.Store(true)
	code := m.Run()
	if pg.cluster != nil {
		if err := pg.cluster.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stop PostgreSQL:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Postgres returns the URL of a new, empty database for t on a real
// PostgreSQL server, dropped at t's cleanup. The server is the one
// [PostgresEnv] names, or else a throwaway cluster of this test binary:
// initdb into a temporary directory, postgres listening on a free loopback
// port, trust authentication for the superuser "postgres". As root, the
// cluster runs as the postgres system user (or nobody), since PostgreSQL
// refuses to run as root.
//
// Without PostgreSQL's programs the test is skipped, or fails when
// CI=true (see [Missing]). The test binary's TestMain must call
// [PostgresMain], which stops the cluster.
func Postgres(t testing.TB) string {
	t.Helper()
	if !pg.main.Load() {
		t.Fatal("testenv: Postgres needs TestMain to call testenv.PostgresMain, which stops the cluster")
	}
	pg.once.Do(startPostgres)
	switch {
	case pg.skip != "":
		Missing(t, "%s", pg.skip)
	case pg.err != nil:
		t.Fatalf("testenv: start PostgreSQL: %v", pg.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.admin)
	if err != nil {
		t.Fatalf("testenv: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("tandem_test_%d_%d", os.Getpid(), pg.n.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, name) })
	u, err := url.Parse(pg.admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// dropDatabase drops a test's database, closing what is still connected.
func dropDatabase(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.admin)
	if err != nil {
		t.Errorf("testenv: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		t.Errorf("testenv: drop database %s: %v", name, err)
	}
}

// startPostgres fills in pg: the server of PostgresEnv, or a new cluster.
func startPostgres() {
	if u := os.Getenv(PostgresEnv); u != "" {
		pg.admin = u
		return
	}
	bin, err := postgresBin()
	if err != nil {
		pg.skip = err.Error()
		return
	}
	pg.cluster, pg.err = startCluster(bin)
	if pg.err == nil {
		pg.admin = pg.cluster.url("postgres")
	}
}

// postgresBin finds the directory of initdb and postgres: Debian's newest
// /usr/lib/postgresql/N/bin, or else initdb on PATH.
func postgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(d string) int { n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return n }
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("testenv: PostgreSQL not found (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): "+
		"install postgresql (apt-get install postgresql), or set %s to a server's URL", PostgresEnv)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// pgCluster is a running throwaway cluster.
type pgCluster struct {
	dir    string // everything: data, socket, log
	port   int
	cred   *syscall.Credential // nil unless run as root
	proc   *os.Process
	exited chan struct{}
}

func (c *pgCluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

func (c *pgCluster) log() string {
	b, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	return string(b)
}

// startCluster runs initdb into a new temporary directory and starts
// postgres on it.
func startCluster(bin string) (*pgCluster, error) {
	dir, err := os.MkdirTemp("", "tandem-pg-")
	if err != nil {
		return nil, err
	}
	c := &pgCluster{dir: dir}
	if os.Geteuid() == 0 {
		if c.cred, err = unprivileged(); err == nil {
			err = os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid))
		}
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := c.command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// The free port may be taken again before postgres binds it; retry then.
	for attempt := 1; ; attempt++ {
		c.port, c.proc = 0, nil // a new free port each time
		err = c.start(bin)
		if err == nil {
			return c, nil
		}
		if attempt == 3 || !strings.Contains(c.log(), "could not bind") {
			log := c.log()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("%v\nlog:\n%s", err, log)
		}
	}
}

// unprivileged is whom the cluster runs as when the tests run as root:
// the postgres system user Debian's package creates, or nobody.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

// command prepares a PostgreSQL program, as the unprivileged user when
// run as root, in a session of its own (never the terminal that runs the
// tests) and without the PG* variables that would point it elsewhere.
func (c *pgCluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: c.cred}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "LC_") && !strings.HasPrefix(kv, "LANG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LANG=C")
	return cmd
}

// start starts postgres on a free loopback port (its socket in the
// cluster's directory) and waits until it takes connections.
func (c *pgCluster) start(bin string) error {
	if c.port == 0 || c.proc == nil {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		c.port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	logf, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	defer logf.Close()
	// Durability is not under test here, only semantics: skip the fsyncs.
	cmd := c.command(filepath.Join(bin, "postgres"), "-D", filepath.Join(c.dir, "data"),
		"-p", strconv.Itoa(c.port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+c.dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "log_min_messages=warning")
	cmd.Stdout, cmd.Stderr = logf, logf
	// If this test binary dies without stopping the cluster (a panic, a
	// timeout), the kernel tells postgres to shut down at once. The signal
	// follows the thread that started the child, so that thread stays
	// locked, alive and waiting for postgres for as long as it runs.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	started := make(chan error, 1)
	c.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(c.exited)
			return
		}
		c.proc = cmd.Process
		started <- nil
		_ = cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		select {
		case <-c.exited:
			return errors.New("postgres exited")
		default:
		}
		if time.Now().After(deadline) {
			c.kill()
			return fmt.Errorf("postgres not ready after 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop shuts postgres down (fast shutdown: clients are disconnected),
// kills its process group if it lingers, and removes the directory.
func (c *pgCluster) stop() error {
	return errors.Join(c.shutdown(), os.RemoveAll(c.dir))
}

// shutdown stops postgres (fast shutdown) and keeps its data.
func (c *pgCluster) shutdown() error {
	var err error
	_ = c.proc.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		err = errors.New("postgres ignored the fast shutdown for 15 s; killed")
	}
	c.kill()
	return err
}

// PostgresServer is a PostgreSQL server of one test's own, which the test
// may stop and start again, as an outage would.
type PostgresServer struct {
	c   *pgCluster
	bin string
}

// OwnPostgres starts a throwaway PostgreSQL cluster for t alone (not the
// shared one [Postgres] hands out databases of), stopped and removed at
// t's cleanup. Without PostgreSQL's programs the test is skipped, or fails
// when CI=true.
func OwnPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		Missing(t, "%v", err)
	}
	c, err := startCluster(bin)
	if err != nil {
		t.Fatalf("testenv: start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := c.stop(); err != nil {
			t.Errorf("testenv: stop PostgreSQL: %v", err)
		}
	})
	return &PostgresServer{c: c, bin: bin}
}

// URL is the server's maintenance database, for tandem's --store.
func (s *PostgresServer) URL() string { return s.c.url("postgres") }

// Stop shuts the server down; clients are disconnected and connecting is
// refused until Start.
func (s *PostgresServer) Stop(t testing.TB) {
	t.Helper()
	if err := s.c.shutdown(); err != nil {
		t.Fatalf("testenv: stop PostgreSQL: %v", err)
	}
}

// Start starts the server again on the same port with the same data.
func (s *PostgresServer) Start(t testing.TB) {
	t.Helper()
	if err := s.c.start(s.bin); err != nil {
		t.Fatalf("testenv: restart PostgreSQL: %v\n%s", err, s.c.log())
	}
}

// kill SIGKILLs postgres's process group: the server and any backend that
// outlived it. It returns once the server is reaped.
func (c *pgCluster) kill() {
	_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
	<-c.exited
}
