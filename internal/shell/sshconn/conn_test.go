package sshconn_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// startBash dials srv and starts an interactive bash whose PTY is drained.
func startBash(t *testing.T, o *sshconn.Options) (shell.Conn, *term) {
	t.Helper()
	c, err := dial(t, o, shell.Launch{Command: bash, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	return c, newTerm(t, c)
}

func TestPTYEcho(t *testing.T) {
	t.Parallel()
	_, tm := startBash(t, options(testenv.SSHD(t)))
	tm.send(t, "echo hi-$((1+1))\r")
	tm.waitFor(t, `hi-2`)
}

func TestResize(t *testing.T) {
	t.Parallel()
	c, tm := startBash(t, options(testenv.SSHD(t)))
	tm.send(t, "stty size\r")
	tm.waitFor(t, `\r24 80\r\n`)
	if err := c.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	tm.send(t, "stty size\r")
	tm.waitFor(t, `\r30 100\r\n`)
	if err := c.Resize(0, 30); err == nil {
		t.Fatal("Resize(0, 30) succeeded")
	}
}

func TestShellExitEndsConn(t *testing.T) {
	t.Parallel()
	c, tm := startBash(t, options(testenv.SSHD(t)))
	tm.send(t, "exit 3\r")
	err := tm.readErr(t)
	var exit *shell.ExitError
	if !errors.As(err, &exit) || exit.Status != 3 || !strings.Contains(err.Error(), "status 3") {
		t.Fatalf("Read after exit 3: %v, want a shell exit with status 3", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), shell.ErrShellExited) {
		t.Fatalf("Err: %v", c.Err())
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	c, err := dial(t, options(testenv.SSHD(t)), shell.Launch{Command: bash})
	if err != nil {
		t.Fatal(err)
	}
	readErr := make(chan error)
	go func() {
		_, err := io.Copy(io.Discard, c)
		if err == nil {
			err = io.EOF // io.Copy hides EOF
		}
		readErr <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if c.Err() != nil {
		t.Fatalf("Err after Close: %v", c.Err())
	}
	if err := <-readErr; err != io.EOF {
		t.Fatalf("pending Read after Close: %v, want io.EOF", err)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read after Close: %v, want io.EOF", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.OpenRelay(t.Context(), "/tmp"); err == nil {
		t.Fatal("OpenRelay after Close succeeded")
	}
}

// TestCloseLeavesNoGoroutines is not parallel: it counts goroutines.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	srv := testenv.SSHD(t)
	first, _, dir := relayShell(t, options(srv)) // another conn holds the FIFOs
	// That conn starts its helper in the background (a session and its
	// stderr copier): a question waits for it, so that what it starts is
	// not counted as c's.
	if err := first.SignalForeground(t.Context(), 1, 15); err == nil {
		t.Fatal("signalling pid 1's terminal group succeeded")
	}
	before := goroutines()
	c, err := options(srv).Dial(t.Context(), shell.Launch{Command: bash})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, c)
	r, err := c.OpenRelay(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, r.Stdout)
	if err := c.SignalForeground(t.Context(), 1, 15); err == nil {
		t.Fatal("signalling pid 1's terminal group succeeded")
	}
	c.Close()
	if leaked := leakedGoroutines(before, wait); leaked != "" {
		t.Fatalf("goroutines left after Close:\n%s", leaked)
	}
}

// lossBudget is how long a dead link may go unnoticed with interval and
// max, plus slack for a loaded machine.
func lossBudget(interval time.Duration, max int) time.Duration {
	return interval*time.Duration(max+1) + 2*time.Second
}

func TestConnectionLostWhenSSHDDies(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	o := options(srv)
	o.KeepaliveInterval, o.KeepaliveMax = 200*time.Millisecond, 3
	c, tm := startBash(t, o)
	tm.send(t, "sleep 100\r")
	tm.waitFor(t, `sleep 100\r\n`)

	start := time.Now()
	srv.Kill()
	err := tm.readErr(t)
	if !errors.Is(err, shell.ErrConnectionLost) {
		t.Fatalf("Read after sshd died: %v", err)
	}
	select {
	case <-c.Done():
	case <-time.After(lossBudget(o.KeepaliveInterval, o.KeepaliveMax)):
		t.Fatal("Done not closed")
	}
	t.Logf("sshd killed: Read failed and Done closed after %v: %v", time.Since(start), c.Err())
	if !errors.Is(c.Err(), shell.ErrConnectionLost) {
		t.Fatalf("Err: %v", c.Err())
	}
}

func TestKeepaliveDetectsSilentLink(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	p := newProxy(t, srv.Addr)
	o := options(srv)
	o.Port = p.port()
	o.KeepaliveInterval, o.KeepaliveMax = 200*time.Millisecond, 3
	c, tm := startBash(t, o)
	tm.send(t, "sleep 100\r")
	tm.waitFor(t, `sleep 100\r\n`)

	start := time.Now()
	p.frozen.Store(true) // packets vanish; no FIN, no RST
	select {
	case <-c.Done():
	case <-time.After(lossBudget(o.KeepaliveInterval, o.KeepaliveMax)):
		t.Fatalf("Done not closed %v after the link went silent", time.Since(start))
	}
	took := time.Since(start)
	t.Logf("silent link detected after %v: %v", took, c.Err())
	if min := o.KeepaliveInterval * time.Duration(o.KeepaliveMax-1); took < min {
		t.Errorf("detected after %v, before %d intervals could pass", took, o.KeepaliveMax-1)
	}
	if err := c.Err(); !errors.Is(err, shell.ErrConnectionLost) || !strings.Contains(err.Error(), "no keepalive reply from 127.0.0.1:") {
		t.Fatalf("Err: %v", err)
	}
	if err := tm.readErr(t); !errors.Is(err, shell.ErrConnectionLost) {
		t.Fatalf("Read: %v", err)
	}
}
