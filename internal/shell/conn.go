package shell

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// ErrConnectionLost is returned (wrapped) by a Conn whose transport died:
// the SSH keepalive went unanswered, the TCP connection reset, or the local
// shell's process vanished. The mcp layer maps it to "connection_lost".
var ErrConnectionLost = errors.New("connection lost")

// ErrNoForeground is returned by SignalForeground when there is no job to
// signal: the shell itself is in the foreground (the command already
// ended) or has no terminal. Signalling the shell would end the session.
var ErrNoForeground = errors.New("no foreground job")

// Launch is what a backend starts: a POSIX sh command line that execs bash
// with tandem's shell integration, in a PTY of the given size.
type Launch struct {
	// Command is run by /bin/sh -c (local) or as the SSH exec command (ssh).
	Command string
	// Env is extra environment for the local backend; SSH servers usually
	// refuse environment requests, so the ssh backend ignores it.
	Env  []string
	Cols int
	Rows int
	// JudgeExec, if set, is asked before every program the shell's process
	// tree starts. A backend that can judge execs (local, sandboxed) must
	// then do so or fail Dial; one that cannot (ssh, local unsandboxed)
	// ignores it, and commands are judged by their line alone.
	JudgeExec LaunchJudge
	// Proxy, if set, is the session's place on tandem's egress proxy. A
	// sandboxed local shell then may reach it and nothing else, and its
	// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (both cases) point there; a
	// backend that cannot confine it so (ssh, local unsandboxed or with
	// network on) must fail Dial rather than run with more network than
	// configured.
	Proxy LaunchProxy
}

// LaunchProxy is a session's place on tandem's egress proxy, which the
// backend starts where the shell can reach it: on a listener of the
// shell's own (inside its network namespace, where nothing else can
// reach it), or else on a port of the host's loopback.
// *egress.Listener is one.
type LaunchProxy interface {
	// Token is the session's credential on the proxy: the proxy URL in
	// the environment carries it, and the proxy refuses a client without
	// it (another user's process on this machine).
	Token() string
	// Serve serves the proxy on ln, a listener the backend made, and
	// returns at once.
	Serve(ln net.Listener) error
	// Listen serves it on a new port of the host's loopback instead and
	// returns the port.
	Listen() (uint16, error)
}

// Dialer starts a shell on one target. Each backend's configuration
// implements it; the session layer holds one per target.
type Dialer interface {
	Dial(ctx context.Context, l Launch) (Conn, error)
}

// Conn is one live backend connection: an interactive shell in a PTY plus
// the relay that carries agent commands in and their stdout/stderr out.
// Read and Write are the PTY master: output from the terminal and
// keystrokes into it. Read returns an error wrapping ErrConnectionLost (or
// io.EOF after Close) when the shell is gone.
type Conn interface {
	io.ReadWriter
	// Resize changes the PTY window size.
	Resize(cols, rows int) error
	// OpenRelay connects to the FIFOs "in", "out" and "err" that the shell
	// integration created in dir on the shell's host. The shell holds all
	// three open read-write, so opening never blocks and readers never see EOF
	// while the shell lives.
	OpenRelay(ctx context.Context, dir string) (*Relay, error)
	// SignalForeground sends sig to the foreground process group of the
	// terminal whose session leader is the shell with pid shellPID (as the
	// shell itself reported it). Used by cancel after Ctrl-C did not work.
	SignalForeground(ctx context.Context, shellPID int, sig syscall.Signal) error
	// Close ends the shell and every process it started, and releases the
	// transport. It is safe to call more than once.
	Close() error
	// Done is closed when the connection has ended, for any reason.
	Done() <-chan struct{}
	// Err says why Done was closed: nil after Close, else an error wrapping
	// ErrConnectionLost.
	Err() error
}

// Relay is the side channel of one shell: Stage receives staged agent
// commands (NUL-terminated), Stdout and Stderr carry agent command output.
type Relay struct {
	Stage  io.WriteCloser
	Stdout io.ReadCloser
	Stderr io.ReadCloser
}

// Close closes all three streams and returns the first error.
func (r *Relay) Close() error {
	return errors.Join(r.Stage.Close(), r.Stdout.Close(), r.Stderr.Close())
}
