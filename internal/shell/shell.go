package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/redact"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/term"
)

// The terminal size a shell starts with unless told otherwise; every layer
// that needs a default size uses these.
const (
	DefaultCols = 120
	DefaultRows = 32
)

// Options configures a Shell. A nil *Options means all defaults.
type Options struct {
	// Logger receives diagnostics. Nil discards them.
	Logger *slog.Logger
	// Cols and Rows are the initial PTY size; zero means DefaultCols x
	// DefaultRows.
	Cols, Rows int
	// ScrollbackBytes bounds what a new viewer is replayed; zero means 256 KiB.
	ScrollbackBytes int
	// OnCommand is called for every command when it ends, the human's and
	// the agent's (Record.Source), in order, including agent commands that
	// outlived their Exec. It runs with the Shell's lock held: it must not
	// block or call the Shell.
	OnCommand func(Record)
	// OnStart, if set, is called when a command starts running, the
	// human's or the agent's, with its record as it stands (its output
	// keeps filling). Same rules.
	OnStart func(Record)
	// OnTouch, if set, is told of every piece of a viewer's input that
	// reaches the agent's running command (see Touch). Same rules.
	OnTouch func(Touch)
	// Spool captures command output with bounded memory. Nil keeps all
	// output in memory, which only tests should do.
	Spool *spool.Dir
	// Output, if set, sees every byte shown to viewers, in order (recordings).
	// It runs with the Shell's lock held and must not block.
	Output func(p []byte)
	// Input, if set, sees the bytes a human typed while the terminal
	// echoes (recordings): keystrokes at a password prompt, or where the
	// backend cannot tell, are not passed on (see EchoReporter and
	// ShellEchoReporter). Same rules.
	Input func(p []byte)
	// Resized, if set, sees every terminal size change (recordings). Same rules.
	Resized func(cols, rows int)
	// JudgeExec, if set, decides every program the shell's process tree
	// starts once the shell is up, where the backend can judge execs (a
	// sandboxed local shell); its rulings are filed in the running
	// command's Record. Nil: programs are not judged.
	JudgeExec ExecJudge
	// Proxy, if set, is the session's place on tandem's egress proxy: a
	// sandboxed local shell may connect there and nowhere else (see
	// Launch.Proxy).
	Proxy LaunchProxy
	// Redact, if set, replaces the secrets it finds in every command's
	// captured output, and in the human's command lines, before anyone
	// reads them: what the agent sees. The counts are in
	// Record.Redacted. Nil: nothing is redacted.
	Redact *redact.Redactor
	// ViewRedact, if set, redacts what viewers see, the scrollback and
	// what Output and Input pass on (the recording): Redact itself where
	// the session hides every secret from viewers, or one that knows only
	// the credentials tandem holds for it. Nil: viewers see the exact bytes.
	ViewRedact *redact.Redactor
	// Raw, if set with Redact, opens where the exact bytes of a captured
	// stream go (name is its spool file's, e.g. cmd_….stdout): kept only
	// when something in the stream was redacted.
	Raw func(name string) RawSink
}

// Record is one finished command, the agent's or the human's.
type Record struct {
	// ID names the command (and its spool files) uniquely.
	ID string
	// Source is "agent" or "user".
	Source  string
	Command string
	// Stdout and Stderr hold the complete streams. For a human's command,
	// Stdout is the terminal output with ANSI sequences stripped.
	Stdout *spool.File
	Stderr *spool.File
	// ExitCode is meaningful only when ExitKnown; a shell whose hooks were
	// removed by the user reports an end without a status.
	ExitCode  int
	ExitKnown bool
	Started   time.Time
	Duration  time.Duration
	// Cwd is the working directory after the command.
	Cwd string
	// Merged is true when stderr is merged into stdout, as it is for a
	// human's command (one TTY).
	Merged bool
	// Viewer names who typed a human command (see WithViewer).
	Viewer string
	// Unattributed marks a human command that the shell reported but no
	// viewer's Enter explains: input tandem could not follow, or a program
	// printing shell-integration marks. It is reported all the same.
	Unattributed bool
	// Interrupt says who interrupted the command, and how, if anyone did.
	Interrupt *Interrupt
	// Repaired names what of the shell integration the command broke and
	// tandem put back: prompt_command, history, emacs, vi, monitor.
	Repaired []string
	// Execs lists the programs the command started, in order, where they
	// are judged (Options.JudgeExec): the first MaxExecRecords of them.
	// ExecsOmitted counts the rest. Blocked lists those that were refused.
	Execs        []ExecRecord
	ExecsOmitted int
	Blocked      []ExecRecord
	// Redacted counts the secrets replaced in Stdout and Stderr (see
	// Options.Redact); of a running command, those written so far.
	Redacted Redactions
}

// Interrupt is how a command was interrupted.
type Interrupt struct {
	// By is "human" (a viewer's key) or "agent" (Cancel).
	By string
	// Key is the key a human pressed ("Ctrl-C", "Ctrl-Z", "Ctrl-\\") or
	// the first step of a cancel ("Ctrl-C").
	Key string
	// Signal is the signal a cancel ended with, when Ctrl-C was not
	// enough: "SIGTERM" or "SIGKILL".
	Signal string
	// Viewer names the human who pressed Key.
	Viewer string
}

// Shell is one interactive bash with tandem's shell integration, shared by
// the agent (Exec) and any number of human viewers (Watch, Input).
type Shell struct {
	conn   Conn
	opts   Options
	log    *slog.Logger
	stageq chan []byte // answers to "want", for writeStages
	// stageMu serialises writes to the relay's "in" FIFO: staged lines
	// (writeStages) and drain answers (answerDrain), each written whole.
	stageMu sync.Mutex

	writeMu sync.Mutex // serialises every write to the PTY

	mu       sync.Mutex
	changed  *sync.Cond // broadcast on every state change
	nonce    string
	parser   *term.Parser
	relay    *Relay
	relayErr error
	// pairs are the relay's FIFO pairs (see background.go); agent lines
	// write to pairs[cur]. rotate asks for a new pair for the next line.
	pairs       []*pair
	cur         int
	rotate      bool
	pairReaders []io.Closer
	bg          *bgRun // background output not yet reported
	pid         int
	rundir      string
	cwd         string
	ready       bool
	fresh       bool // a P mark was seen: the next B is a new, empty prompt
	promptUp    bool // a new prompt is drawn and no line has left it since
	promptDue   bool // an agent line was accepted; its prompt has not been drawn yet
	// lateInput: the prompt after an agent command was drawn before the
	// relay delivered the command's end; the prompt counts once it does.
	lateInput bool
	cont      bool // the human is at a PS2 continuation prompt
	human     *humanRun
	agent     *agentRun
	held      []heldInput // human input held back while an agent line is staged
	src       keySources  // whose keys may be unread in the terminal's queue
	// credits are the Enter keys viewers sent that no line of the shell's
	// used yet, oldest first: each may start one human command. While
	// any is left the prompt is not idle (a typed-ahead line is coming).
	credits []credit
	// creditSeq numbers the next credit filed. stageKeys holds, for each
	// stage key written and not yet read by the shell, the creditSeq at
	// its writing, oldest first: once the shell reads a stage key, every
	// Enter typed before it was read too, by a line or by a program.
	creditSeq uint64
	stageKeys []uint64
	keys      keyScanner
	lastUse   time.Time // when the shell last showed it read a line (a prompt, C, PS2)
	inputAt   time.Time
	eofAt     time.Time // when a viewer last pressed Ctrl-D at the prompt
	// humanExit: the shell exited while a human command ran, or after a
	// viewer's Ctrl-D at the prompt.
	humanExit  bool
	typed      []string      // the lines readline accepted for the next command
	typedBy    credit        // the Enter that submitted its first line
	typedOK    bool          // typedBy is a viewer's Enter
	lost       string        // why the integration is lost, if it is
	alt        altScreen     // whether a full-screen program shows
	fixLine    string        // a repair tandem types at the next prompt (set -o emacs)
	fixing     bool          // the repair line was typed; its P mark ends it
	exitMark   bool          // the shell's exit hook ran outside an agent line
	drained    chan struct{} // closed when readPTY has returned
	fgShell    bool          // the last PTY read happened with the shell in the foreground
	holdOut    bool          // PTY output held until the relay catches up
	heldOut    []byte
	scrollback *term.Ring
	viewRed    *redact.Stream // redacts what viewers see (Options.ViewRedact)
	inputRed   *redact.Stream // redacts the keys Options.Input records
	live       *term.Ring     // recent output, read by viewers at their own offsets
	viewers    map[*viewer]struct{}
	closed     bool
	err        error
	startOut   bytes.Buffer // output before the first prompt, for error messages

	// ledger is whom the shell ran commands for, and when (owners.go).
	ledger execguard.Ledger
	// startTook is how long the shell took from its start to its first
	// prompt (StartTook); set once, before Start returns.
	startTook time.Duration
}

// Start launches the integrated shell on conn and waits until it shows its
// first prompt with the relay connected. On error conn is closed.
func Start(ctx context.Context, d Dialer, opts *Options) (*Shell, error) {
	s := &Shell{viewers: map[*viewer]struct{}{}, drained: make(chan struct{})}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.Cols <= 0 || s.opts.Rows <= 0 {
		s.opts.Cols, s.opts.Rows = DefaultCols, DefaultRows
	}
	s.stageq = make(chan []byte, 4)
	if s.opts.ScrollbackBytes <= 0 {
		s.opts.ScrollbackBytes = 256 << 10
	}
	s.changed = sync.NewCond(&s.mu)
	s.scrollback = term.NewRing(s.opts.ScrollbackBytes)
	s.live = newLive()
	s.viewStream()
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, fmt.Errorf("shell start: %w: nonce: %w", ErrStart, err)
	}
	s.nonce = hex.EncodeToString(nb[:])
	l := Launch{Command: LaunchCommand(), Cols: s.opts.Cols, Rows: s.opts.Rows, Proxy: s.opts.Proxy}
	if s.opts.JudgeExec != nil {
		l.JudgeExec = s.judgeExec
	}
	conn, err := d.Dial(ctx, l)
	if err != nil {
		return nil, fmt.Errorf("shell start: %w: %w", ErrStart, err)
	}
	s.conn = conn
	dialed := time.Now()
	go s.readPTY()
	go s.watchConn()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("shell start: %w: %w", ErrStart, err)
	}
	s.startTook = time.Since(dialed)
	go s.watchReplace()
	return s, nil
}

func (s *Shell) waitReady(ctx context.Context) error {
	stop := context.AfterFunc(ctx, s.wake)
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.ready {
		switch {
		case s.err != nil:
			return s.withStartOut(s.err)
		case s.relayErr != nil:
			return fmt.Errorf("open relay: %w", s.relayErr)
		case ctx.Err() != nil:
			// Slow or prompting startup files are the usual cause.
			return s.withStartOut(fmt.Errorf("no prompt from the shell integration (are the login's startup files slow, or waiting for input?): %w", ctx.Err()))
		}
		s.changed.Wait()
	}
	return nil
}

// withStartOut adds what the shell printed before failing to start, so the
// user sees where it got to; s.mu is held.
func (s *Shell) withStartOut(err error) error {
	if out := term.StripString(s.startOut.String()); strings.TrimSpace(out) != "" {
		return fmt.Errorf("%w; the shell printed: %q", err, lastBytes(out, 500))
	}
	return err
}

func (s *Shell) wake() {
	s.mu.Lock()
	s.changed.Broadcast()
	s.mu.Unlock()
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// watchConn records why the connection ended and wakes every waiter.
func (s *Shell) watchConn() {
	<-s.conn.Done()
	s.fail(s.conn.Err())
}

func (s *Shell) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		switch {
		case err != nil:
			s.err = err
		case s.closed:
			s.err = ErrClosed
		default:
			s.err = fmt.Errorf("%w: shell ended", ErrConnectionLost)
		}
	}
	s.flushHeldOut()
	for v := range s.viewers {
		v.end()
	}
	s.changed.Broadcast()
}

// ErrStart wraps every failure of Start: the shell, or tandem's
// integration in it, did not come up.
var ErrStart = errors.New("shell did not start")

// ErrClosed is returned by calls on a Shell after Close.
var ErrClosed = errors.New("shell closed")

// ErrShellExited is wrapped by an ExitError: the session ended because its
// shell exited (exit, set -e, a killed shell), not because the transport
// broke.
var ErrShellExited = errors.New("shell exited")

// ExitError is how a Conn reports that its shell process ended on its own.
type ExitError struct {
	// Status is the exit status; meaningful when Signal is empty.
	Status int
	// Signal names the signal that killed the shell, if one did.
	Signal string
	// Where names the shell, e.g. "the shell on host:22".
	Where string
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("%s was killed by %s", e.Where, e.Signal)
	}
	return fmt.Sprintf("%s exited with status %d", e.Where, e.Status)
}

// Unwrap makes errors.Is(err, ErrShellExited) hold.
func (e *ExitError) Unwrap() error { return ErrShellExited }

// Err reports why the shell is unusable, or nil while it lives.
func (s *Shell) Err() error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	// The connection can end before the readers noticed: its own account
	// (an exit status) is the reason.
	select {
	case <-s.conn.Done():
		if cerr := s.conn.Err(); cerr != nil {
			return cerr
		}
		return ErrClosed
	default:
		return nil
	}
}

// Done is closed when the underlying connection ends.
func (s *Shell) Done() <-chan struct{} { return s.conn.Done() }

// Close ends the shell and its processes.
func (s *Shell) Close() error {
	// A connection that already ended keeps its own account (an exit
	// status): once closed, it would report only that it was closed.
	select {
	case <-s.conn.Done():
		if cerr := s.conn.Err(); cerr != nil {
			s.fail(cerr)
		}
	default:
	}
	s.mu.Lock()
	s.closed = true
	relay := s.relay
	s.mu.Unlock()
	// What the shell wrote before it ended may still be in the relay, and
	// an Exec may be waiting for it: read it to its end (bounded: a process
	// that escaped the session may hold the relay open) before closing it.
	// A shell that ended on its own is drained before its connection is
	// closed, since over SSH the relay rides on that connection.
	drain := func() {
		if relay != nil {
			s.mu.Lock()
			s.waitRelayDrained()
			s.mu.Unlock()
		}
	}
	select {
	case <-s.conn.Done():
		drain()
	default:
	}
	err := s.conn.Close()
	if relay != nil {
		drain()
		_ = relay.Close()
	}
	s.mu.Lock()
	readers := s.pairReaders
	s.pairReaders = nil
	s.mu.Unlock()
	for _, r := range readers {
		_ = r.Close()
	}
	s.fail(ErrClosed)
	return err
}

// Busy reports whether a command (the agent's or the human's) is running.
func (s *Shell) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent != nil || s.human != nil
}

// PID is the shell's process id on its host, as the shell reported it.
func (s *Shell) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Cwd is the working directory the shell last reported.
func (s *Shell) Cwd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}
