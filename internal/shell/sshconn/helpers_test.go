package sshconn_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// bash is an interactive bash without rc files, for predictable output.
const bash = "exec bash --norc --noprofile -i"

// wait bounds every poll in these tests; the machine may be loaded.
const wait = 20 * time.Second

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(nil, 10*time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked after all tests:\n%s", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// goroutines returns the stacks of running goroutines by their header line.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		id, _, _ := strings.Cut(g, " [")
		out[id] = g
	}
	return out
}

// leakedGoroutines polls until no goroutine outside before runs code of
// x/crypto/ssh or this package, and returns the stacks of any that remain.
func leakedGoroutines(before map[string]string, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		var leaked []string
		for id, g := range goroutines() {
			if _, ok := before[id]; ok {
				continue
			}
			if strings.Contains(g, "golang.org/x/crypto/ssh") || strings.Contains(g, "internal/shell/sshconn.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// options returns Options that log into srv with its key file.
func options(srv *testenv.SSHDServer) *sshconn.Options {
	return &sshconn.Options{
		Host: srv.Host, Port: srv.Port, User: srv.User,
		KeyFile: srv.ClientKeyFile, KnownHostsFile: srv.KnownHostsFile,
	}
}

// dial dials with a deadline and closes the conn in t.Cleanup.
func dial(t *testing.T, o *sshconn.Options, l shell.Launch) (shell.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, err := o.Dial(ctx, l)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// term drains a Conn's PTY, as the session layer must, and lets a test
// wait for output.
type term struct {
	c       shell.Conn
	mu      sync.Mutex
	buf     bytes.Buffer
	pos     int           // where the next waitFor starts looking
	changed chan struct{} // closed and replaced when buf or err change
	err     error         // Read's final error
}

func newTerm(t *testing.T, c shell.Conn) *term {
	tm := &term{c: c, changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := make([]byte, 4096)
		for {
			n, err := c.Read(p)
			tm.mu.Lock()
			tm.buf.Write(p[:n])
			if err != nil {
				tm.err = err
			}
			close(tm.changed)
			tm.changed = make(chan struct{})
			tm.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		c.Close()
		select {
		case <-done:
		case <-time.After(wait):
			t.Errorf("Read still blocked %v after Close", wait)
		}
	})
	return tm
}

func (tm *term) send(t *testing.T, s string) {
	t.Helper()
	if _, err := tm.c.Write([]byte(s)); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// waitFor waits for re to match output after the previous match and
// returns the submatches.
func (tm *term) waitFor(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(wait)
	for {
		tm.mu.Lock()
		out, ch, err := tm.buf.Bytes()[tm.pos:], tm.changed, tm.err
		if loc := rx.FindSubmatchIndex(out); loc != nil {
			m := rx.FindSubmatch(out)
			tm.pos += loc[1]
			tm.mu.Unlock()
			s := make([]string, len(m))
			for i := range m {
				s[i] = string(m[i])
			}
			return s
		}
		tm.mu.Unlock()
		if err != nil {
			t.Fatalf("waiting for %q: read ended: %v; output:\n%q", re, err, out)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %q in output after %v:\n%q", re, wait, out)
		}
	}
}

// readErr waits for Read to fail and returns its error.
func (tm *term) readErr(t *testing.T) error {
	t.Helper()
	deadline := time.After(wait)
	for {
		tm.mu.Lock()
		ch, err := tm.changed, tm.err
		tm.mu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("Read still succeeds after %v", wait)
		}
	}
}

// proxy forwards TCP connections to a target that can be switched, and can
// freeze to play a network that silently drops everything.
type proxy struct {
	ln     net.Listener
	target atomic.Value // string
	frozen atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, stop: make(chan struct{})}
	p.target.Store(target)
	var mu sync.Mutex
	var conns []net.Conn
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target.Load().(string))
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			p.wg.Add(2)
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(p.stop)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.frozen.Load() {
			<-p.stop // hold the bytes; the peer hears nothing
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }
