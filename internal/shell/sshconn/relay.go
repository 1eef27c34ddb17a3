package sshconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/shell"
)

// relayScript streams the FIFOs in $1 over the channel: out to stdout, err
// to stderr, and stdin into in. It first checks the FIFOs and writes one
// ready byte, which OpenRelay consumes. Then only the two readers hold the
// channel's stdout and stderr, so once the shell has gone and they have
// passed on its last bytes, the channel reaches EOF. When stdin ends
// (Relay.Stage closed, or the channel closed) it stops the two readers,
// which would otherwise block on their FIFOs for as long as the shell
// lives.
const relayScript = `for f in in out err; do [ -p "$1/$f" ] || { echo "$1/$f is not a FIFO" >&2; exit 2; }; done; ` +
	`printf ` + relayReady + `; cat "$1/out" & o=$!; cat "$1/err" >&2 & e=$!; exec >/dev/null 2>&1; cat >"$1/in"; kill $o $e`

const relayReady = "R"

// OpenRelay starts the relay on a second session channel, without a PTY,
// so bytes pass unchanged, and returns once it runs: a dir without the
// three FIFOs is an error. Writes to Stage go straight to the channel
// (they block only for SSH flow control). Stdout and Stderr share the
// channel's window: read both concurrently, or one stalls the other. The
// channel closes once all three streams are closed.
func (c *conn) OpenRelay(ctx context.Context, dir string) (*shell.Relay, error) {
	if dir == "" || strings.ContainsRune(dir, 0) {
		return nil, fmt.Errorf("sshconn: open relay: invalid directory %q", dir)
	}
	var (
		stage          io.WriteCloser
		stdout, stderr io.Reader
	)
	s, err := c.openSession(ctx, func(s *ssh.Session) (err error) {
		if stage, err = s.StdinPipe(); err != nil {
			return err
		}
		if stdout, err = s.StdoutPipe(); err != nil {
			return err
		}
		if stderr, err = s.StderrPipe(); err != nil {
			return err
		}
		if err := s.Start("exec sh -c " + shellQuote(relayScript) + " tandem-relay " + shellQuote(dir)); err != nil {
			return err
		}
		ready := make([]byte, len(relayReady))
		if _, err := io.ReadFull(stdout, ready); err != nil || string(ready) != relayReady {
			msg, _ := io.ReadAll(io.LimitReader(stderr, 1024))
			if len(msg) == 0 {
				return fmt.Errorf("relay did not start: read %q, %v", ready, err)
			}
			return fmt.Errorf("relay did not start: %s", bytes.TrimSpace(msg))
		}
		return nil
	})
	if err == nil && !c.track() {
		s.Close()
		err = net.ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("sshconn: open relay in %s: %w", dir, err)
	}
	r := &relay{c: c, s: s, open: 3, ended: make(chan struct{})}
	go func() {
		defer c.wg.Done()
		r.wait()
	}()
	return &shell.Relay{
		Stage:  &relayWriter{r: r, w: stage},
		Stdout: &relayReader{r: r, rd: stdout},
		Stderr: &relayReader{r: r, rd: stderr},
	}, nil
}

// relay is the shared state of one relay channel's three streams.
type relay struct {
	c     *conn
	s     *ssh.Session
	ended chan struct{} // closed when the remote command has ended
	lost  error         // set before ended closes: the conn's loss, if any

	mu   sync.Mutex
	open int // streams not yet closed
}

// wait records how the relay's command ended.
func (r *relay) wait() {
	var exit *ssh.ExitError
	if err := r.s.Wait(); err != nil && !errors.As(err, &exit) && r.c.transportGone() != nil {
		<-r.c.done
		r.lost = r.c.Err()
	}
	close(r.ended)
}

// release closes the channel when the last of the three streams closes.
func (r *relay) release() error {
	r.mu.Lock()
	r.open--
	last := r.open == 0
	r.mu.Unlock()
	if !last {
		return nil
	}
	if err := r.s.Close(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sshconn: close relay: %w", err)
	}
	return nil
}

// streamErr turns a failed stream operation into the conn's loss when the
// connection died, else returns err.
func (r *relay) streamErr(err error) error {
	<-r.ended
	if r.lost != nil {
		return r.lost
	}
	return err
}

type relayReader struct {
	r      *relay
	rd     io.Reader
	closed atomic.Bool
}

// Read returns relay output as it arrives. It returns io.EOF when the relay
// was closed, its stream ended (the shell is gone) or its command ended,
// and an error wrapping shell.ErrConnectionLost when the connection died.
func (rr *relayReader) Read(p []byte) (int, error) {
	n, err := rr.rd.Read(p)
	if err != nil && !rr.closed.Load() {
		if errors.Is(err, io.EOF) && rr.r.c.transportGone() == nil {
			// The stream ended while the connection lives: the shell is
			// gone and its last bytes have passed.
			return n, io.EOF
		}
		err = rr.r.streamErr(err)
	}
	return n, err
}

func (rr *relayReader) Close() error {
	if rr.closed.Swap(true) {
		return nil
	}
	return rr.r.release()
}

type relayWriter struct {
	r      *relay
	w      io.WriteCloser
	closed atomic.Bool
}

// Write sends p on the channel at once; nothing is buffered here.
func (rw *relayWriter) Write(p []byte) (int, error) {
	n, err := rw.w.Write(p)
	if err != nil && !rw.closed.Load() {
		err = rw.r.streamErr(err)
	}
	return n, err
}

// Close sends EOF, which ends the remote command, and releases the stream.
func (rw *relayWriter) Close() error {
	if rw.closed.Swap(true) {
		return nil
	}
	err := rw.w.Close()
	if errors.Is(err, io.EOF) {
		err = nil // the channel is already closed
	}
	return errors.Join(err, rw.r.release())
}

// shellQuote quotes s as one word for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pairScript streams the FIFOs out.$2 and err.$2 in $1 over the channel,
// out to stdout and err to stderr, after checking them and writing one
// ready byte. It ends once both reach EOF (every writer gone).
const pairScript = `for f in out.$2 err.$2; do [ -p "$1/$f" ] || { echo "$1/$f is not a FIFO" >&2; exit 2; }; done; ` +
	`printf ` + relayReady + `; cat "$1/out.$2" & cat "$1/err.$2" >&2; wait`

var _ shell.PairOpener = (*conn)(nil)

// OpenPair reads the FIFOs dir/out.NAME and dir/err.NAME on a channel of
// their own, as OpenRelay reads out and err; NAME is a number.
func (c *conn) OpenPair(ctx context.Context, dir, name string) (io.ReadCloser, io.ReadCloser, error) {
	if _, err := strconv.Atoi(name); err != nil || dir == "" || strings.ContainsRune(dir, 0) {
		return nil, nil, fmt.Errorf("sshconn: open FIFO pair %q in %q: invalid", name, dir)
	}
	var stdout, stderr io.Reader
	s, err := c.openSession(ctx, func(s *ssh.Session) (err error) {
		if stdout, err = s.StdoutPipe(); err != nil {
			return err
		}
		if stderr, err = s.StderrPipe(); err != nil {
			return err
		}
		if err := s.Start("exec sh -c " + shellQuote(pairScript) + " tandem-pair " + shellQuote(dir) + " " + name); err != nil {
			return err
		}
		ready := make([]byte, len(relayReady))
		if _, err := io.ReadFull(stdout, ready); err != nil || string(ready) != relayReady {
			msg, _ := io.ReadAll(io.LimitReader(stderr, 1024))
			return fmt.Errorf("pair reader did not start: %v %s", err, bytes.TrimSpace(msg))
		}
		return nil
	})
	if err == nil && !c.track() {
		s.Close()
		err = net.ErrClosed
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sshconn: open FIFO pair %s in %s: %w", name, dir, err)
	}
	r := &relay{c: c, s: s, open: 2, ended: make(chan struct{})}
	go func() {
		defer c.wg.Done()
		r.wait()
	}()
	return &relayReader{r: r, rd: stdout}, &relayReader{r: r, rd: stderr}, nil
}
