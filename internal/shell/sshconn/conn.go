package sshconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/shell"
)

// conn is the shell.Conn of one SSH connection.
type conn struct {
	addr   string
	nc     net.Conn
	client *ssh.Client

	session *ssh.Session   // the interactive shell
	stdin   io.WriteCloser // its PTY input, unbuffered
	stdout  io.Reader      // its PTY output (stderr merged by the PTY)

	helpers helperProbe // answers questions about the server's processes (helper.go)

	done chan struct{}
	life context.Context // ends with done
	stop context.CancelFunc
	wg   sync.WaitGroup // every goroutine this conn started

	mu     sync.Mutex
	ended  bool  // done is closed
	closed bool  // Close was called
	err    error // why done was closed; nil after Close
}

var _ shell.Conn = (*conn)(nil)

func newConn(addr string, nc net.Conn, client *ssh.Client) *conn {
	life, stop := context.WithCancel(context.Background())
	return &conn{addr: addr, nc: nc, client: client, done: make(chan struct{}), life: life, stop: stop,
		helpers: helperProbe{sem: make(chan struct{}, 1)}}
}

// startShell opens the PTY session and starts l.Command in it.
func (c *conn) startShell(l shell.Launch) error {
	s, err := c.client.NewSession()
	if err != nil {
		return err
	}
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 14400, ssh.TTY_OP_OSPEED: 14400}
	if err := s.RequestPty("xterm-256color", orDefault(l.Rows, 24), orDefault(l.Cols, 80), modes); err != nil {
		s.Close()
		return fmt.Errorf("request pty: %w", err)
	}
	c.session = s
	if c.stdin, err = s.StdinPipe(); err != nil {
		return err
	}
	if c.stdout, err = s.StdoutPipe(); err != nil {
		return err
	}
	if l.Command == "" {
		return s.Shell()
	}
	return s.Start(l.Command)
}

// watch starts the goroutines that end the conn: the shell exiting, the
// transport closing, and keepalives going unanswered.
func (c *conn) watch(interval time.Duration, max int) {
	c.wg.Add(3)
	go func() {
		defer c.wg.Done()
		err := c.shellEnded(c.session.Wait())
		// A shell that exited leaves its last output on the relay's
		// channels: the transport stays up for it until Close.
		c.endKeep(err, errors.Is(err, shell.ErrShellExited))
	}()
	go func() {
		defer c.wg.Done()
		c.end(c.transportEnded(c.client.Wait()))
	}()
	go c.keepalive(interval, max)
}

// Read returns PTY output as it arrives; it does no buffering of its own.
// The caller must keep reading: unread output stalls the remote shell once
// the channel's window is full. When the shell is gone Read returns an
// error wrapping shell.ErrConnectionLost, or io.EOF after Close.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if err != nil {
		err = c.streamErr()
	}
	return n, err
}

// Write sends keystrokes to the PTY. It blocks while the remote side's
// window is full.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err != nil {
		if err = c.streamErr(); err == io.EOF {
			err = fmt.Errorf("sshconn: write: %w", net.ErrClosed)
		}
	}
	return n, err
}

// streamErr waits until the conn has ended (a PTY stream failing means it
// is ending) and returns why, or io.EOF after Close.
func (c *conn) streamErr() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.err == nil {
		return io.EOF
	}
	return c.err
}

// Resize sends a window-change request; the remote kernel then signals
// SIGWINCH to the foreground job.
func (c *conn) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 {
		return fmt.Errorf("sshconn: resize to %dx%d: size must be positive", cols, rows)
	}
	if err := c.session.WindowChange(rows, cols); err != nil {
		return fmt.Errorf("sshconn: resize: %w", err)
	}
	return nil
}

// Done is closed when the conn ends: Close, the shell exiting, or the
// connection dying. After the shell exits, the transport (and so the
// relay's channels) stays up until Close, so its last output can be read.
func (c *conn) Done() <-chan struct{} { return c.done }

// Err says why Done was closed: nil after Close (or before Done), else an
// error wrapping shell.ErrConnectionLost.
func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the TCP connection, which ends every channel; sshd then
// hangs up the PTY, and the shell and its jobs get SIGHUP. Close returns
// once all of the conn's goroutines have ended.
func (c *conn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.end(nil)
	c.client.Close()
	c.wg.Wait()
	return nil
}

// end records why the conn ended (the first reason wins; none after
// Close), closes done and tears the connection down.
func (c *conn) end(reason error) { c.endKeep(reason, false) }

// endKeep is end, leaving the transport up when keep is set (Close takes
// it down).
func (c *conn) endKeep(reason error, keep bool) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	if !c.closed {
		c.err = reason
	}
	close(c.done)
	c.stop()
	c.mu.Unlock()
	// Not session.Close: that writes to the peer, and blocks when the peer
	// is gone and the socket buffer is full.
	if !keep {
		c.client.Close()
	}
}

// shellEnded explains the interactive session's end, given Session.Wait's
// result.
func (c *conn) shellEnded(err error) error {
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return fmt.Errorf("sshconn: %w", &shell.ExitError{Where: "the shell on " + c.addr})
	case errors.As(err, &exit) && exit.Signal() != "":
		return fmt.Errorf("sshconn: %w", &shell.ExitError{Where: "the shell on " + c.addr, Signal: "SIG" + exit.Signal()})
	case errors.As(err, &exit):
		return fmt.Errorf("sshconn: %w", &shell.ExitError{Where: "the shell on " + c.addr, Status: exit.ExitStatus()})
	}
	if gone := c.transportGone(); gone != nil {
		return gone
	}
	return c.lost("the shell's channel to %s closed without an exit status", c.addr)
}

// transportGone returns why the transport ended, or nil if it still
// answers a request.
func (c *conn) transportGone() error {
	if _, _, err := c.client.SendRequest(keepaliveRequest, true, nil); err == nil {
		return nil
	}
	return c.transportEnded(c.client.Wait())
}

func (c *conn) transportEnded(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return c.lost("%s closed the connection", c.addr)
	}
	return c.lost("the connection to %s broke: %v", c.addr, err)
}

// lost builds an error wrapping shell.ErrConnectionLost.
func (c *conn) lost(format string, args ...any) error {
	return fmt.Errorf("sshconn: %w: %s", shell.ErrConnectionLost, fmt.Sprintf(format, args...))
}

// track counts a new goroutine in wg, unless the conn is closed.
func (c *conn) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// openSession opens a session channel and runs fn on it (setting up
// streams, starting or running a command), giving up when ctx ends; the
// session is then closed. On success the caller owns the session.
func (c *conn) openSession(ctx context.Context, fn func(*ssh.Session) error) (*ssh.Session, error) {
	if !c.track() {
		return nil, net.ErrClosed
	}
	type result struct {
		s   *ssh.Session
		err error
	}
	res := make(chan result)
	go func() {
		defer c.wg.Done()
		s, err := c.client.NewSession()
		if err == nil {
			stop := context.AfterFunc(ctx, func() { s.Close() })
			err = fn(s)
			if !stop() {
				err = ctx.Err() // the session was closed under fn
			}
			if err != nil {
				s.Close()
			}
		}
		select {
		case res <- result{s, err}:
		case <-ctx.Done():
			if err == nil {
				s.Close()
			}
		}
	}()
	select {
	case r := <-res:
		if r.err != nil {
			return nil, r.err
		}
		return r.s, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
