package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustNil(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// TestOpenUnreachable: nothing listens, so Open fails at once, naming the
// server and asking whether PostgreSQL runs.
func TestOpenUnreachable(t *testing.T) {
	port := freePort(t)
	start := time.Now()
	_, err := postgres.Open(context.Background(), "postgres://tandem:secret@127.0.0.1:"+strconv.Itoa(port)+"/tandem")
	took := time.Since(start)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), addr) ||
		!strings.Contains(err.Error(), "is PostgreSQL running?") || strings.Contains(err.Error(), "secret") || took > 5*time.Second {
		t.Fatalf("open with nothing listening: %v after %v; want unavailable, naming %s, within seconds", err, took, addr)
	}
	t.Log(err)
}

// TestOpenSilentServer: something accepts the connection but never
// answers, as a server behind a dead link would; Open gives up after the
// connect timeout rather than hang.
func TestOpenSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustNil(t, err)
	defer ln.Close()
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	_, err = postgres.Open(context.Background(), "postgres://tandem@"+ln.Addr().String()+"/tandem?connect_timeout=1&sslmode=disable")
	took := time.Since(start)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), ln.Addr().String()) || took > 4*time.Second {
		t.Fatalf("open on a silent server: %v after %v; want unavailable after about 1 s", err, took)
	}
	t.Log(err)
}

// TestOpenRefused: a reachable server that refuses the login (a missing
// database) is not an outage: the error says what PostgreSQL said, and is
// not ErrUnavailable.
func TestOpenRefused(t *testing.T) {
	u, err := url.Parse(testenv.Postgres(t))
	mustNil(t, err)
	u.Path = "/no_such_database"
	_, err = postgres.Open(context.Background(), u.String())
	if err == nil || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "no_such_database") {
		t.Fatalf("open of a missing database: %v; want PostgreSQL's answer, not unavailable", err)
	}
	t.Log(err)
}

// proxy forwards loopback connections to a PostgreSQL server, and can cut
// them all and refuse new ones (down), then listen again on the same port
// (up), as a server that stops and comes back does.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, addr: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	p.up()
	t.Cleanup(func() { p.down(); p.wg.Wait() })
	return p
}

func (p *proxy) up() {
	var err error
	for range 50 { // the port can linger briefly after down
		if p.ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustNil(p.t, err)
	ln := p.ln
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
}

func (p *proxy) down() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestOutageAndRecovery stops the database mid-use: every call fails at
// once with ErrUnavailable, naming the server, and none hangs; when the
// server is back the same handle works again by itself, on the same chain.
func TestOutageAndRecovery(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(testenv.Postgres(t))
	mustNil(t, err)
	p := newProxy(t, u.Host)
	u.Host = p.addr
	db := open(t, u.String())
	st := store.Store(db)

	mustNil(t, st.RegisterInstance(ctx, store.Instance{ID: "i", StartedAt: time.Now()}))
	for i := range 3 {
		_, err := st.AppendAudit(ctx, link("before", i))
		mustNil(t, err)
	}

	p.down()
	calls := map[string]func() error{
		"Heartbeat":        func() error { return st.Heartbeat(ctx, "i", time.Now()) },
		"ActiveSessions":   func() error { _, err := st.ActiveSessions(ctx); return err },
		"ActiveSessionsOf": func() error { _, err := st.ActiveSessionsOf(ctx, "t", "a", "o"); return err },
		"AppendAudit":      func() error { _, err := st.AppendAudit(ctx, link("during", 0)); return err },
		"ScanAudit":        func() error { return st.ScanAudit(ctx, func(store.AuditRecord) error { return nil }) },
		"Writable":         func() error { return st.Writable(ctx) },
		"RevokedJTIs":      func() error { _, err := st.RevokedJTIs(ctx); return err },
	}
	for round := range 2 { // the first round meets broken connections, the second refused ones
		for name, call := range calls {
			start := time.Now()
			err := call()
			if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), p.addr) || time.Since(start) > 2*time.Second {
				t.Fatalf("round %d, %s while down: %v after %v; want unavailable, naming %s, at once", round, name, err, time.Since(start), p.addr)
			}
			if round == 1 && name == "AppendAudit" {
				t.Log(err)
			}
		}
	}

	p.up()
	deadline := time.Now().Add(10 * time.Second)
	for name, call := range calls {
		for {
			err := call()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the server came back: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var prev store.AuditRecord
	mustNil(t, st.ScanAudit(ctx, func(r store.AuditRecord) error {
		if r.Seq != prev.Seq+1 || r.PrevHash != prev.Hash {
			t.Errorf("record %d does not follow record %d", r.Seq, prev.Seq)
		}
		prev = r
		return nil
	}))
	if prev.Seq != 4 {
		t.Fatalf("chain of %d records after recovery; want the 3 before and 1 after", prev.Seq)
	}
}
