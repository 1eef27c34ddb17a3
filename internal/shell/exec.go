package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// BusyError says why the shell cannot take an agent command now.
type BusyError struct {
	// Reason is one sentence for the agent.
	Reason string
	// Command is the running command line, when known.
	Command string
	// Line is the human's half-typed line, when that is the reason.
	Line string
	// Since is when the running command started, when known.
	Since time.Time
}

func (e *BusyError) Error() string { return "session busy: " + e.Reason }

// TimeoutError is returned by Exec when the command outlived its timeout.
// The command keeps running; Partial holds the output so far.
type TimeoutError struct{ Partial Record }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("command still running after %s", e.Partial.Duration.Round(time.Millisecond))
}

// ErrNotRunning is returned by Cancel when no agent command is running.
var ErrNotRunning = errors.New("no agent command is running")

// ExecOptions tunes one Exec call.
type ExecOptions struct {
	// Timeout bounds the wait for the command; zero means 120 s.
	Timeout time.Duration
	// Admit, if set, runs with the shell's lock held just before the command
	// is staged, so that no human command can finish between the caller's
	// checks and the start; an error refuses the command.
	Admit func() error
	// OnOutput, if set, sees the command's output as it arrives (stream 0 is
	// stdout, 1 stderr). It runs with the shell's lock held: it must not
	// block, call the Shell, or keep p.
	OnOutput func(stream int, p []byte)
}

// stageTimeout bounds the wait for the shell to accept a staged line.
const stageTimeout = 5 * time.Second

type agentRun struct {
	rec       Record
	stagedAt  time.Time
	reply     string // staged, busy or stagefail
	busyLine  string
	staged    bool // the shell took the line; held input is released
	preempted bool // a human command started before the line was staged
	redrawn   bool
	begun     bool
	ended     bool
	cwdSeen   bool
	relayEnds int
	capturing [2]bool
	early     []byte
	done      bool
	onOutput  func(stream int, p []byte)
}

func (a *agentRun) relayDone() bool { return a.relayEnds >= 2 }

// Exec runs command in the shared shell, typed at the prompt so the human
// sees it, with stdout and stderr captured separately and exactly.
func (s *Shell) Exec(ctx context.Context, command string, o ExecOptions) (Record, error) {
	if o.Timeout <= 0 {
		o.Timeout = 120 * time.Second
	}
	if strings.IndexByte(command, 0) >= 0 {
		return Record{}, errors.New("exec: command contains a NUL byte")
	}
	a, err := s.claim(ctx, command, o)
	if err != nil {
		return Record{}, err
	}
	if err := s.stage(ctx, a, command); err != nil {
		return Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err = s.waitUntil(ctx, o.Timeout, func() bool { return a.done })
	switch {
	case err == nil:
		return a.rec, nil
	case errors.Is(err, errDeadline) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		p := a.rec // the streams keep filling while the command runs
		if !a.begun {
			p.Started = a.stagedAt
		}
		p.Duration = time.Since(p.Started)
		if errors.Is(err, errDeadline) {
			return p, &TimeoutError{Partial: p}
		}
		return p, fmt.Errorf("exec: %w", err)
	default:
		return Record{}, fmt.Errorf("exec: %w", err)
	}
}

// claim reserves the shell for one agent command.
func (s *Shell) claim(ctx context.Context, command string, o ExecOptions) (*agentRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A command just ended and its prompt is on the way: wait for it, so
	// back-to-back calls never see a spurious busy.
	if s.fresh && !s.atPrompt && s.agent == nil && s.human == nil {
		_ = s.waitUntil(ctx, stageTimeout, func() bool { return s.atPrompt || !s.fresh })
	}
	if s.err != nil {
		return nil, s.err
	}
	switch {
	case s.agent != nil:
		return nil, &BusyError{Reason: "an agent command is still running", Command: s.agent.rec.Command, Since: s.agent.rec.Started}
	case s.human != nil:
		return nil, &BusyError{Reason: "a command the human started is still running", Command: s.human.rec.Command, Since: s.human.rec.Started}
	case s.cont:
		return nil, &BusyError{Reason: "the human is in the middle of a multi-line command"}
	case !s.ready || !s.atPrompt:
		return nil, &BusyError{Reason: "the shell is not at an idle prompt"}
	}
	if o.Admit != nil {
		if err := o.Admit(); err != nil {
			return nil, err
		}
	}
	id := newCommandID()
	a := &agentRun{
		rec: Record{ID: id, Source: "agent", Command: command,
			Stdout: s.opts.Spool.New(id + ".stdout"), Stderr: s.opts.Spool.New(id + ".stderr")},
		stagedAt: time.Now(), onOutput: o.OnOutput,
	}
	s.agent = a
	return a, nil
}

// stage hands the line to the shell through the relay and the stage key,
// then presses the accept key once the shell confirms.
func (s *Shell) stage(ctx context.Context, a *agentRun, command string) error {
	release := func() {
		s.mu.Lock()
		if s.agent == a {
			s.agent = nil
		}
		held := s.takeHeld()
		s.mu.Unlock()
		if len(held) > 0 {
			_, _ = s.writePTY(held)
		}
	}
	s.mu.Lock()
	relay := s.relay
	s.mu.Unlock()
	if _, err := relay.Stage.Write([]byte(a.rec.ID + "\n" + command + "\x00")); err != nil {
		release()
		return fmt.Errorf("exec: stage: %w", err)
	}
	if _, err := s.writePTY([]byte(keyStage)); err != nil {
		release()
		return fmt.Errorf("exec: stage: %w", err)
	}
	s.mu.Lock()
	err := s.waitUntil(ctx, stageTimeout, func() bool { return a.reply != "" || a.preempted })
	reply, line, preempted := a.reply, a.busyLine, a.preempted
	s.mu.Unlock()
	switch {
	case preempted:
		release()
		return &BusyError{Reason: "a command the human started is still running"}
	case err != nil:
		release()
		return fmt.Errorf("exec: the shell did not take the command: %w", err)
	case reply == "busy":
		release()
		return &BusyError{Reason: "the human has typed a partial command line", Line: line}
	case reply != "staged":
		release()
		return errors.New("exec: the shell could not read the staged command")
	}
	// Accept, then whatever the human typed meanwhile, in that order.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	held := s.takeHeld()
	s.mu.Unlock()
	if _, err := s.conn.Write(append([]byte(keyAccept), held...)); err != nil {
		return fmt.Errorf("exec: accept: %w", err)
	}
	return nil
}

// takeHeld returns and clears the held human input; s.mu is held.
func (s *Shell) takeHeld() []byte {
	b := bytes.Join(s.held, nil)
	s.held = nil
	return b
}

var errDeadline = errors.New("deadline passed")

// waitUntil waits with s.mu held until cond holds, the shell fails, ctx
// ends or d passes (errDeadline).
func (s *Shell) waitUntil(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	t := time.AfterFunc(d, s.wake)
	defer t.Stop()
	stop := context.AfterFunc(ctx, s.wake)
	defer stop()
	for !cond() {
		switch {
		case s.err != nil:
			return s.err
		case ctx.Err() != nil:
			return ctx.Err()
		case !time.Now().Before(deadline):
			return errDeadline
		}
		s.changed.Wait()
	}
	return nil
}

// Cancel interrupts the running agent command: Ctrl-C first, then SIGTERM
// and SIGKILL to the terminal's foreground process group, grace apart.
func (s *Shell) Cancel(ctx context.Context, grace time.Duration) (Record, error) {
	if grace <= 0 {
		grace = 2 * time.Second
	}
	s.mu.Lock()
	a := s.agent
	pid := s.pid
	s.mu.Unlock()
	if a == nil {
		return Record{}, ErrNotRunning
	}
	steps := []func() error{
		func() error { _, err := s.writePTY([]byte{3}); return err },
		func() error { return s.conn.SignalForeground(ctx, pid, syscall.SIGTERM) },
		func() error { return s.conn.SignalForeground(ctx, pid, syscall.SIGKILL) },
	}
	for _, step := range steps {
		// No foreground job means the command just ended: wait for its end.
		if err := step(); err != nil && !errors.Is(err, ErrNoForeground) {
			return Record{}, fmt.Errorf("cancel: %w", err)
		}
		s.mu.Lock()
		err := s.waitUntil(ctx, grace, func() bool { return a.done })
		rec := a.rec
		s.mu.Unlock()
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, errDeadline) {
			return Record{}, fmt.Errorf("cancel: %w", err)
		}
	}
	return Record{}, errors.New("cancel: the command survived SIGKILL")
}

// Input types human keystrokes into the terminal. While an agent line is
// being staged the keystrokes are held and sent right after it.
func (s *Shell) Input(ctx context.Context, p []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.opts.Input != nil {
		s.opts.Input(p)
	}
	// A submitted line leaves the prompt; a half-typed one is the stage
	// function's to notice (it sees readline's buffer).
	if s.atPrompt && s.agent == nil && bytes.ContainsAny(p, "\r\n\x03\x04") {
		s.atPrompt = false
	}
	if a := s.agent; a != nil && !a.staged {
		s.held = append(s.held, bytes.Clone(p))
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if _, err := s.conn.Write(p); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	return nil
}

// Resize changes the terminal size for every viewer.
func (s *Shell) Resize(ctx context.Context, cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("resize: %dx%d is out of range", cols, rows)
	}
	if err := s.conn.Resize(cols, rows); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	if s.opts.Resized != nil {
		s.mu.Lock()
		s.opts.Resized(cols, rows)
		s.mu.Unlock()
	}
	return nil
}

func (s *Shell) writePTY(p []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.conn.Write(p)
}

// openRelay connects the side channel once the shell reported its run dir.
func (s *Shell) openRelay(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := s.conn.OpenRelay(ctx, dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Broadcast()
	if err != nil {
		s.relayErr = err
		return
	}
	if s.closed {
		_ = r.Close()
		return
	}
	s.relay = r
	if s.atPrompt {
		s.ready = true
	}
	go s.readRelay(r.Stdout, 0)
	go s.readRelay(r.Stderr, 1)
}

// readRelay splits one relay stream into agent output and mirrors it to
// the viewers, since it never passes through the terminal.
func (s *Shell) readRelay(r io.Reader, stream int) {
	fs := newFrameScanner(s.nonce)
	buf := make([]byte, 64<<10)
	var crlf []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.mu.Lock()
			fs.feed(buf[:n], func(k frameKind, p []byte) {
				a := s.agent
				switch k {
				case frameBegin:
					if a != nil && a.staged {
						a.capturing[stream] = true
					}
				case frameEnd:
					if a != nil && a.capturing[stream] {
						a.capturing[stream] = false
						a.relayEnds++
						s.finishRuns()
						s.changed.Broadcast()
					}
				case frameData:
					if a != nil && a.capturing[stream] {
						if stream == 0 {
							_, _ = a.rec.Stdout.Write(p)
						} else {
							_, _ = a.rec.Stderr.Write(p)
						}
						if a.onOutput != nil {
							a.onOutput(stream, p)
						}
					}
					crlf = toCRLF(crlf[:0], p)
					s.show(crlf)
				}
			})
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}
