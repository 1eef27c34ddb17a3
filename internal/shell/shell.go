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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/term"
)

// Options configures a Shell. A nil *Options means all defaults.
type Options struct {
	// Logger receives diagnostics. Nil discards them.
	Logger *slog.Logger
	// Cols and Rows are the initial PTY size; zero means 120x32.
	Cols, Rows int
	// ScrollbackBytes bounds what a new viewer is replayed; zero means 256 KiB.
	ScrollbackBytes int
	// OnCommand is called for every command when it ends, the human's and
	// the agent's (Record.Source), in order, including agent commands that
	// outlived their Exec. It runs with the Shell's lock held: it must not
	// block or call the Shell.
	OnCommand func(Record)
	// Spool captures command output with bounded memory. Nil keeps all
	// output in memory, which only tests should do.
	Spool *spool.Dir
	// Output, if set, sees every byte shown to viewers, in order (recordings).
	// It runs with the Shell's lock held and must not block.
	Output func(p []byte)
	// Input, if set, sees every byte a human typed (recordings). Same rules.
	Input func(p []byte)
	// Resized, if set, sees every terminal size change (recordings). Same rules.
	Resized func(cols, rows int)
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
}

// Shell is one interactive bash with tandem's shell integration, shared by
// the agent (Exec) and any number of human viewers (Watch, Input).
type Shell struct {
	conn Conn
	opts Options
	log  *slog.Logger

	writeMu sync.Mutex // serialises every write to the PTY

	mu         sync.Mutex
	changed    *sync.Cond // broadcast on every state change
	nonce      string
	parser     *term.Parser
	relay      *Relay
	relayErr   error
	pid        int
	rundir     string
	cwd        string
	ready      bool
	fresh      bool // a P mark was seen: the next B is a new, empty prompt
	atPrompt   bool // a new prompt is drawn and no line was submitted since
	cont       bool // the human is at a PS2 continuation prompt
	human      *humanRun
	agent      *agentRun
	held       [][]byte // human input held back while an agent line is staged
	holdOut    bool     // PTY output held until the relay catches up
	heldOut    []byte
	scrollback *term.Ring
	viewers    map[*viewer]struct{}
	closed     bool
	err        error
	startOut   bytes.Buffer // output before the first prompt, for error messages
}

// Start launches the integrated shell on conn and waits until it shows its
// first prompt with the relay connected. On error conn is closed.
func Start(ctx context.Context, d Dialer, opts *Options) (*Shell, error) {
	s := &Shell{viewers: map[*viewer]struct{}{}}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.Cols <= 0 || s.opts.Rows <= 0 {
		s.opts.Cols, s.opts.Rows = 120, 32
	}
	if s.opts.ScrollbackBytes <= 0 {
		s.opts.ScrollbackBytes = 256 << 10
	}
	s.changed = sync.NewCond(&s.mu)
	s.scrollback = term.NewRing(s.opts.ScrollbackBytes)
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, fmt.Errorf("shell start: nonce: %w", err)
	}
	s.nonce = hex.EncodeToString(nb[:])
	conn, err := d.Dial(ctx, Launch{Command: LaunchCommand(), Cols: s.opts.Cols, Rows: s.opts.Rows})
	if err != nil {
		return nil, fmt.Errorf("shell start: %w", err)
	}
	s.conn = conn
	go s.readPTY()
	go s.watchConn()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("shell start: %w", err)
	}
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

// ErrClosed is returned by calls on a Shell after Close.
var ErrClosed = errors.New("shell closed")

// Err reports why the shell is unusable, or nil while it lives.
func (s *Shell) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Done is closed when the underlying connection ends.
func (s *Shell) Done() <-chan struct{} { return s.conn.Done() }

// Close ends the shell and its processes.
func (s *Shell) Close() error {
	s.mu.Lock()
	s.closed = true
	relay := s.relay
	s.mu.Unlock()
	err := s.conn.Close()
	if relay != nil {
		_ = relay.Close()
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

// helloMark is the untrusted request with which the rc asks for the nonce.
var helloMark = []byte("\x1b]633;X;hello\x07")

// readPTY drains the terminal for the life of the connection.
func (s *Shell) readPTY() {
	buf := make([]byte, 64<<10)
	var pre []byte // output before the hello mark
	handshaken := false
	for {
		n, err := s.conn.Read(buf)
		b := buf[:n]
		if n > 0 && !handshaken {
			b, pre, handshaken = s.beforeHello(append(pre, b...))
			if handshaken {
				if _, werr := s.writePTY([]byte(s.nonce + "\n")); werr != nil {
					s.fail(werr)
					return
				}
			}
		}
		if len(b) > 0 {
			s.mu.Lock()
			s.parser.Feed(b, s.item)
			s.mu.Unlock()
		}
		if err != nil {
			if errors.Is(err, io.EOF) || s.conn.Err() == nil {
				s.fail(nil)
			} else {
				s.fail(s.conn.Err())
			}
			return
		}
	}
}

// beforeHello shows what the shell printed before asking for the nonce
// (an rc's banner, say) and, once the hello mark is in, creates the parser
// and returns the bytes after it. A mark split across reads is held back.
func (s *Shell) beforeHello(pre []byte) (rest, keep []byte, seen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := bytes.Index(pre, helloMark)
	if i < 0 {
		k := len(pre) - markerPrefixLen(pre, helloMark)
		s.preHello(pre[:k])
		return nil, append(pre[:0], pre[k:]...), false
	}
	s.preHello(pre[:i])
	s.parser = term.NewParser(s.nonce)
	return pre[i+len(helloMark):], nil, true
}

// preHello displays early output and keeps its tail for error messages.
func (s *Shell) preHello(p []byte) {
	s.display(p)
	s.noteStart(p)
}

// noteStart keeps the tail of what the shell printed before its first
// prompt, for Start's error messages.
func (s *Shell) noteStart(p []byte) {
	s.startOut.Write(p)
	if s.startOut.Len() > 8<<10 {
		tail := bytes.Clone(s.startOut.Bytes()[s.startOut.Len()-4<<10:])
		s.startOut.Reset()
		s.startOut.Write(tail)
	}
}

// item handles one parsed piece of terminal output; s.mu is held.
func (s *Shell) item(it term.Item) {
	if it.Event == nil {
		if !s.ready {
			s.noteStart(it.Data)
		}
		if s.human != nil {
			_, _ = s.human.plain.Write(it.Data)
		}
		if a := s.agent; a != nil && a.redrawn && !a.begun {
			a.early = append(a.early, it.Data...)
		}
		s.display(it.Data)
		return
	}
	s.event(it.Event)
	s.changed.Broadcast()
}

// display sends bytes to the scrollback, the viewers and the recording; s.mu is held.
func (s *Shell) display(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.holdOut {
		s.heldOut = append(s.heldOut, p...)
		return
	}
	s.show(p)
}

func (s *Shell) show(p []byte) {
	_, _ = s.scrollback.Write(p)
	if s.opts.Output != nil {
		s.opts.Output(p)
	}
	for v := range s.viewers {
		v.send(p)
	}
}

func (s *Shell) flushHeldOut() {
	s.holdOut = false
	if len(s.heldOut) > 0 {
		s.show(s.heldOut)
		s.heldOut = nil
	}
}

// event advances the state machine; s.mu is held.
func (s *Shell) event(e *term.Event) {
	switch e.Kind {
	case term.Private:
		s.private(e)
	case term.InputStart:
		if a := s.agent; a != nil && a.reply == "staged" {
			a.redrawn = true
		}
		if s.fresh {
			s.fresh, s.atPrompt, s.cont = false, true, false
			if s.relay != nil {
				s.ready = true
			}
		}
	case term.CommandStart:
		s.atPrompt = false
		if s.agent != nil && s.agent.staged {
			if !s.agent.begun {
				s.agent.begun = true
				s.agent.rec.Started = time.Now()
			}
			return
		}
		if a := s.agent; a != nil && !a.staged {
			a.preempted = true // the human's type-ahead ran first
		}
		if s.human == nil {
			s.human = s.newHumanRun()
		}
	case term.CommandLine:
		if s.human != nil {
			s.human.rec.Command = e.Text
		}
	case term.CommandEnd:
		if s.agent != nil && s.agent.begun {
			s.agent.rec.ExitCode, s.agent.rec.ExitKnown = e.Exit, e.HasExit
			s.agent.rec.Duration = time.Since(s.agent.rec.Started)
			s.agent.ended = true
			if !s.agent.relayDone() {
				s.holdOut = true
			}
		} else if s.human != nil {
			s.human.rec.ExitCode, s.human.rec.ExitKnown = e.Exit, e.HasExit
			s.human.rec.Duration = time.Since(s.human.rec.Started)
			s.human.ended = true
		}
	case term.Cwd:
		s.cwd = e.Text
		s.fresh = true
		if s.agent != nil && s.agent.ended {
			s.agent.cwdSeen = true
		}
		s.finishRuns()
	case term.PromptStart:
		// A prompt while a command is still open means the user's rc removed
		// tandem's PROMPT_COMMAND hook: the command ended, status unknown.
		if (s.human != nil && !s.fresh) || (s.agent != nil && s.agent.begun && !s.agent.ended) {
			if s.human != nil {
				s.human.ended = true
				s.human.rec.Duration = time.Since(s.human.rec.Started)
			}
			if s.agent != nil && s.agent.begun && !s.agent.ended {
				s.agent.ended, s.agent.cwdSeen, s.agent.relayEnds = true, true, 2
				s.agent.rec.Duration = time.Since(s.agent.rec.Started)
			}
			s.fresh = true
			s.finishRuns()
		}
	}
}

func (s *Shell) private(e *term.Event) {
	switch e.Text {
	case "ready":
		if s.pid != 0 {
			return
		}
		s.rundir = e.Fields["dir"]
		s.pid, _ = strconv.Atoi(e.Fields["pid"])
		go s.openRelay(s.rundir)
	case "staged", "busy", "stagefail":
		a := s.agent
		if a != nil && a.reply == "" && (e.Text == "stagefail" || e.Fields["id"] == a.rec.ID) {
			a.reply, a.busyLine = e.Text, e.Fields["line"]
			a.staged = e.Text == "staged"
		} else if e.Text == "staged" {
			// A line tandem stopped waiting for: it must never run.
			go func() { _, _ = s.writePTY([]byte(keyUnstage)) }()
		}
	case "skipped":
		if s.agent != nil && s.agent.staged && !s.agent.begun {
			st, err := strconv.Atoi(e.Fields["status"])
			s.agent.begun, s.agent.ended, s.agent.relayEnds = true, true, 2
			s.agent.rec.ExitCode, s.agent.rec.ExitKnown = st, err == nil
			s.agent.rec.Started = s.agent.stagedAt
			s.agent.rec.Duration = time.Since(s.agent.stagedAt)
			// What bash printed (a syntax error), without the echoed line.
			msg := term.StripString(string(s.agent.early))
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[i+1:]
			}
			_, _ = s.agent.rec.Stderr.Write([]byte(msg))
		}
	case "ps2":
		s.cont = true
	}
}

// finishRuns completes the open human and agent commands once their ends
// are all in; s.mu is held.
func (s *Shell) finishRuns() {
	if h := s.human; h != nil && h.ended {
		s.human = nil
		h.rec.Cwd = s.cwd
		_ = h.plain.Flush()
		_ = h.rec.Stdout.Close()
		if s.opts.OnCommand != nil {
			s.opts.OnCommand(h.rec)
		}
	}
	if a := s.agent; a != nil && a.ended && a.cwdSeen && a.relayDone() {
		a.rec.Cwd = s.cwd
		_ = a.rec.Stdout.Close()
		_ = a.rec.Stderr.Close()
		a.done = true
		s.agent = nil
		s.flushHeldOut()
		if s.opts.OnCommand != nil {
			s.opts.OnCommand(a.rec)
		}
	}
}

type humanRun struct {
	rec   Record
	plain *term.Plain // strips ANSI into rec.Stdout as output arrives
	ended bool
}

func (s *Shell) newHumanRun() *humanRun {
	id := newCommandID()
	out := s.opts.Spool.New(id + ".out")
	return &humanRun{
		rec:   Record{ID: id, Source: "user", Started: time.Now(), Merged: true, Stdout: out},
		plain: term.NewPlain(out),
	}
}

// newCommandID names a command uniquely, across sessions and restarts.
func newCommandID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "cmd_" + hex.EncodeToString(b[:])
}
