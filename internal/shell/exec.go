package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/tandem-sh/tandem/internal/term"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults owned here; callers pass zero to get them.
const (
	// DefaultExecTimeout bounds an Exec whose options name no timeout: under
	// the 60 s request timeout of common MCP clients.
	DefaultExecTimeout = 50 * time.Second
	// DefaultCancelGrace is the wait between Ctrl-C, SIGTERM and SIGKILL.
	DefaultCancelGrace = 2 * time.Second
	// MaxCommandBytes is the largest command Exec accepts. A heredoc that
	// writes a file is normal agent work, so it is generous; beyond it the
	// line editor's redraw of the line gets slow.
	MaxCommandBytes = 1 << 20
	// relayDrainWait bounds the wait for a dead shell's last output.
	relayDrainWait = time.Second
	// stageTimeout bounds the shell's confirmation of a staged line.
	stageTimeout = 5 * time.Second
	// stageBytesPerSecond is the slowest pace at which a busy machine's
	// bash is still taken to be reading a long staged line (it reads a
	// pipe a byte at a time; a loaded CI machine was seen at 60 KB/s):
	// the stage limit grows by a second for each this many bytes, so a
	// 1 MiB line is not taken for a wedged shell.
	stageBytesPerSecond = 16 << 10
)

// stageLimit bounds the shell's confirmation of a staged line of n bytes.
func stageLimit(n int) time.Duration {
	return stageTimeout + time.Duration(n/stageBytesPerSecond)*time.Second
}

// What holds a busy shell (BusyError.Kind).
const (
	BusyAgent        = "agent_command" // the agent's own command runs
	BusyHuman        = "human_command" // a command the human started runs
	BusyPartialLine  = "partial_line"  // the human has half typed a line
	BusyContinuation = "continuation"  // the human is in a multi-line command
	BusyNotIdle      = "not_idle"      // the shell shows no idle prompt
	// BusyHumanInput: the human typed into the agent's command and it
	// has not read it all, or tandem cannot tell (SSH): the agent's keys
	// would mix with theirs in the terminal's queue.
	BusyHumanInput = "human_input"
)

// BusyError says why the shell cannot take an agent command now.
type BusyError struct {
	// Kind is one of the Busy constants.
	Kind string
	// Reason is one sentence for the agent.
	Reason string
	// Command is the running command line, when known.
	Command string
	// CommandID names the running command, when one runs.
	CommandID string
	// Line is the human's half-typed line, when that is the reason.
	Line string
	// Since is when the running command started, when known.
	Since time.Time
}

func (e *BusyError) Error() string { return "session busy: " + e.Reason }

// busyRunning is the BusyError for a running command; s.mu is held.
func (s *Shell) busyRunning() *BusyError {
	if a := s.agent; a != nil {
		return &BusyError{Kind: BusyAgent, Reason: "an agent command is still running", Command: a.rec.Command, CommandID: a.rec.ID, Since: a.rec.Started}
	}
	return s.busyHuman()
}

// busyHuman is the BusyError for the human's running command; s.mu is held.
func (s *Shell) busyHuman() *BusyError {
	h := s.human
	return &BusyError{Kind: BusyHuman, Reason: "a command the human started is still running", Command: s.redactText(h.rec.Command), CommandID: h.rec.ID, Since: h.rec.Started}
}

// TimeoutError is returned by Exec when the command outlived its timeout.
// The command keeps running; Partial holds the output so far.
type TimeoutError struct {
	Partial Record
	// State says what the command does with the terminal: whether it
	// waits for input (and where), or shows a full screen.
	State InputState
	// Held, when set, names what a program of the command waits for (an
	// approval's id, see ExecInfo.Hold): Exec returned after
	// ExecOptions.HoldWait, before the timeout, because of it.
	Held string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("command still running after %s", e.Partial.Duration.Round(time.Millisecond))
}

// ErrNotRunning is returned by Cancel when no agent command is running.
var ErrNotRunning = errors.New("no agent command is running")

// ErrInvalidCommand wraps every refusal of a command's text (a NUL byte,
// too large): the caller's input is wrong, not the shell.
var ErrInvalidCommand = errors.New("invalid command")

// ErrIntegrationLost says the shell no longer runs tandem's integration
// (a command replaced the shell with exec, or removed the hooks in a way
// tandem could not repair): its commands can no longer be captured, and
// the session must be reconnected.
var ErrIntegrationLost = errors.New("shell integration lost")

// ErrCaptureFailed says the shell ran, or may have run, the agent's line
// but tandem could not capture its result: the reply must say so rather
// than report an empty success.
var ErrCaptureFailed = errors.New("output capture failed")

// ExecOptions tunes one Exec call.
type ExecOptions struct {
	// Timeout bounds the whole call, staging included; zero means
	// DefaultExecTimeout.
	Timeout time.Duration
	// Admit, if set, runs with the shell's lock held just before the command
	// is staged, so that no human command can finish between the caller's
	// checks and the start; an error refuses the command.
	Admit func() error
	// Check, if set, runs after Admit, with the shell's lock held, given
	// the working directory the shell last reported: the place to check
	// that the command still runs where it was judged. An error refuses
	// the command before any key is pressed.
	Check func(cwd string) error
	// HoldWait, if positive, is how long Exec waits once a program of the
	// command is held for a human (ExecInfo.Hold) before it returns a
	// TimeoutError naming the hold; the command keeps running. Zero waits
	// for the command as long as Timeout allows.
	HoldWait time.Duration
	// OnOutput, if set, sees the command's output as it arrives (stream 0 is
	// stdout, 1 stderr). It runs with the shell's lock held: it must not
	// block, call the Shell, or keep p.
	OnOutput func(stream int, p []byte)
}

// phase is where one agent command stands; it only moves forward.
type phase int

const (
	phaseClaimed  phase = iota // the shell is reserved; no key pressed yet
	phaseStaging               // stage key pressed; the shell asks, reads, stages
	phaseAccepted              // the shell holds the line; accept key pressed
	phaseDone                  // both relay streams ended; the record is final
)

// streamState is where one relay stream stands for the current command.
type streamState int

const (
	streamWaiting streamState = iota // no begin mark for this command yet
	streamEcho                       // stderr: readline's redraw, display only
	streamCapture                    // the command's own output
	streamClosed                     // end mark seen
)

type agentRun struct {
	rec        Record
	holdWait   time.Duration // ExecOptions.HoldWait
	held       string        // what a held program of the command waits for
	heldAt     time.Time     // since when; zero when nothing is held
	heldWait   time.Duration // how long Exec waits on this hold
	phase      phase
	sent       bool // the record went to the shell's "in" FIFO
	reply      string
	busyLine   string
	preempt    bool // a human command started before the line was staged
	streams    [2]streamState
	echoTail   []byte         // stderr echo since the last B mark (syntax errors)
	outEarly   []byte         // stdout for viewers, held until the echo is shown
	hooks      bool           // the prompt came back without tandem's hooks
	healing    bool           // the heal key was pressed for this command
	inPrompt   [2]bool        // a prompt is being drawn into the capture
	incomplete bool           // bash asked for a continuation line
	tentative  [2]*term.Event // end marks read while a program held the terminal
	lastOut    []byte         // the end of the output, both streams, for lastLine
	settle     settleMarks    // whether it waits for input or shows a full screen (settle.go)
	// later is viewer input from an interrupt key on, held until the
	// command has started; releasing while it is being sent.
	later     []byte
	releasing bool
	// inputClosed: the shell asked for the drain, the command has ended;
	// the agent's keys are refused from then on.
	inputClosed bool
	answered    bool // the rc's drain request was answered
	// humanKeys: a viewer's keys reached the terminal during the command
	// and may be unread (see awaitHumanRead); humanSeq counts such
	// writes, humanLineEnd says whether the last ended a line.
	humanKeys    bool
	humanSeq     int
	humanLineEnd bool
	started      bool // the start mark came: the line runs
	onOutput     func(stream int, p []byte)
	// out are stdout and stderr on their way to rec's files, through the
	// session's redactor.
	out [2]*outStream
}

// captured files bytes of stream i that the agent may read (redacted);
// s.mu is held.
func (a *agentRun) captured(i int, p []byte) {
	if i == 0 {
		_, _ = a.rec.Stdout.Write(p)
	} else {
		_, _ = a.rec.Stderr.Write(p)
	}
	if a.onOutput != nil {
		a.onOutput(i, p)
	}
	a.lastOut = appendBounded(a.lastOut, p, maxLastLine*4)
}

// closeOut ends both streams: the redactor releases what it held, and
// the files are complete; s.mu is held.
func (a *agentRun) closeOut() {
	a.rec.Redacted = Redactions{Stdout: a.out[0].end(), Stderr: a.out[1].end()}
	_ = a.rec.Stdout.Close()
	_ = a.rec.Stderr.Close()
}

// Exec runs command in the shared shell, typed at the prompt so the human
// sees it, with stdout and stderr captured separately and exactly. If ctx
// ends while the command runs, the command is interrupted as by Cancel and
// the error wraps ctx's.
func (s *Shell) Exec(ctx context.Context, command string, o ExecOptions) (Record, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultExecTimeout
	}
	if i := strings.IndexByte(command, 0); i >= 0 {
		return Record{}, fmt.Errorf("exec: %w: the command contains a NUL byte at offset %d; shell commands cannot carry NUL, write such data with printf '\\0'", ErrInvalidCommand, i)
	}
	if len(command) > MaxCommandBytes {
		return Record{}, fmt.Errorf("exec: %w: the command is %d bytes, over the limit of %d; write large content to a file in smaller pieces", ErrInvalidCommand, len(command), MaxCommandBytes)
	}
	deadline := time.Now().Add(o.Timeout)
	s.refreshRedact()
	a, err := s.claim(ctx, command, o)
	if err != nil {
		return Record{}, err
	}
	if err := s.stage(ctx, a, min(stageLimit(len(command)), o.Timeout)); err != nil {
		return Record{}, err
	}
	stopSettle := s.watchSettle(a)
	s.mu.Lock()
	err = s.waitUntil(ctx, time.Until(deadline), func() bool {
		_, settled := s.settledLocked(a)
		return a.phase == phaseDone || a.holdExpired() || settled
	})
	settled, isSettled := s.settledLocked(a)
	held := ""
	if err == nil && a.phase != phaseDone {
		held, err = a.held, errDeadline
	}
	if err != nil && s.err != nil {
		// The shell is gone; what it wrote before is still in the relay.
		s.waitRelayDrained()
	}
	rec := a.partial()
	last := bytes.Clone(a.lastOut)
	s.mu.Unlock()
	stopSettle()
	switch {
	case err == nil:
		if lost := s.lostReason(); a.hooks && lost != "" {
			return rec, fmt.Errorf("exec: %w: %s", ErrIntegrationLost, lost)
		}
		if a.hooks {
			return rec, fmt.Errorf("exec: %w: the command removed tandem's PROMPT_COMMAND hook and tandem could not put it back, so its exit code is unknown and later commands cannot be captured", ErrIntegrationLost)
		}
		return rec, nil
	case errors.Is(err, errDeadline):
		if s.replaced(a) {
			s.mu.Lock()
			rec = a.rec
			s.mu.Unlock()
			return rec, fmt.Errorf("exec: %w: %s", ErrIntegrationLost, s.lostReason())
		}
		s.mu.Lock()
		full := s.fullScreenLocked(a)
		s.mu.Unlock()
		te := &TimeoutError{Partial: rec, State: InputState{LastLine: s.redactText(lastLine(last)), FullScreen: full}, Held: held}
		if isSettled && held == "" {
			te.State = settled
		} else {
			s.probeInput(&te.State)
		}
		return rec, te
	case ctx.Err() != nil:
		// The caller is gone: never leave its command running unseen.
		ictx, cancel := context.WithTimeout(context.Background(), 4*DefaultCancelGrace)
		defer cancel()
		if r, cerr := s.Cancel(ictx, 0); cerr == nil {
			rec = r
		}
		return rec, fmt.Errorf("exec: interrupted: %w", ctx.Err())
	default:
		return rec, fmt.Errorf("exec: %w", err)
	}
}

// waitRelayDrained waits, bounded, until both relay streams were read to
// their end; s.mu is held.
func (s *Shell) waitRelayDrained() {
	deadline := time.Now().Add(relayDrainWait)
	t := time.AfterFunc(relayDrainWait, s.wake)
	defer t.Stop()
	for len(s.pairs) > s.cur && s.pairs[s.cur].eof < 2 && time.Now().Before(deadline) {
		s.changed.Wait()
	}
}

// partial is the record as it stands; s.mu is held. The streams keep
// filling while the command runs.
func (a *agentRun) partial() Record {
	p := a.rec
	if a.phase < phaseDone {
		p.Duration = time.Since(p.Started)
		p.Redacted = Redactions{Stdout: a.out[0].count(), Stderr: a.out[1].count()}
	}
	return p
}

// claim reserves the shell for one agent command.
func (s *Shell) claim(ctx context.Context, command string, o ExecOptions) (*agentRun, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A lost integration is known at once: no prompt will come to settle
	// on (see replace.go).
	if s.lost == "" {
		s.settle(ctx)
	}
	if s.err != nil {
		return nil, s.err
	}
	if s.lost != "" || ((s.agent != nil || s.human != nil) && s.replacedNow()) {
		return nil, fmt.Errorf("exec: %w: %s", ErrIntegrationLost, s.lost)
	}
	if s.agent == nil && s.human != nil {
		if what := s.nestedNow(); what != "" {
			return nil, s.nestedError("exec", what)
		}
	}
	switch {
	case s.agent != nil || s.human != nil:
		return nil, s.busyRunning()
	case s.cont:
		return nil, &BusyError{Kind: BusyContinuation, Reason: "the human is in the middle of a multi-line command"}
	case !s.ready || !s.idlePrompt():
		return nil, &BusyError{Kind: BusyNotIdle, Reason: "the shell is not at an idle prompt"}
	}
	if o.Admit != nil {
		if err := o.Admit(); err != nil {
			return nil, err
		}
	}
	if o.Check != nil {
		if err := o.Check(s.cwd); err != nil {
			return nil, err
		}
	}
	id := newCommandID()
	a := &agentRun{
		rec: Record{ID: id, Source: "agent", Command: command, Started: time.Now(),
			Stdout: s.opts.Spool.New(id + ".stdout"), Stderr: s.opts.Spool.New(id + ".stderr")},
		onOutput: o.OnOutput,
		holdWait: o.HoldWait,
		settle:   settleMarks{based: true, altBase: s.alt.ons},
	}
	for i, name := range []string{id + ".stdout", id + ".stderr"} {
		a.out[i] = s.newOut(sinkFunc(func(p []byte) { a.captured(i, p) }), name)
	}
	s.agent = a
	return a, nil
}

// stage presses the stage key; the shell asks for the line ("want"), which
// want answers from the relay writer; once the shell confirms "staged",
// stage presses the accept key. Viewer input is held from the claim until
// the accept key is written, so it can never merge into the agent's line.
func (s *Shell) stage(ctx context.Context, a *agentRun, limit time.Duration) error {
	s.writeMu.Lock()
	s.mu.Lock()
	a.phase = phaseStaging
	s.stageKeyWritten()
	s.mu.Unlock()
	_, err := s.conn.Write([]byte(keyStage))
	s.writeMu.Unlock()
	if err != nil {
		s.abandon(a)
		return fmt.Errorf("exec: stage: %w", err)
	}
	s.mu.Lock()
	err = s.waitUntil(ctx, limit, func() bool { return a.reply != "" || a.preempt })
	reply, line, preempt := a.reply, a.busyLine, a.preempt
	var busy *BusyError
	if preempt && s.human != nil {
		busy = s.busyHuman()
	}
	s.mu.Unlock()
	switch {
	case preempt:
		s.abandon(a)
		if busy == nil {
			busy = &BusyError{Kind: BusyHuman, Reason: "a command the human started is still running"}
		}
		return busy
	case errors.Is(err, errDeadline):
		s.abandon(a)
		return fmt.Errorf("exec: %w: the shell did not take the command within %s%s; tandem pressed its stage key and got no answer", ErrUnresponsive, limit, s.stoppedNote())
	case err != nil:
		s.abandon(a)
		return fmt.Errorf("exec: %w", err)
	case reply == "busy":
		s.abandon(a)
		return &BusyError{Kind: BusyPartialLine, Reason: "the human has typed a partial command line", Line: s.redactText(line)}
	case reply != "staged":
		s.abandon(a)
		return fmt.Errorf("exec: %w: the shell could not read the staged command", ErrCaptureFailed)
	}
	// Accept, then whatever the human typed meanwhile, in that order.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	a.phase = phaseAccepted
	a.rec.Started = time.Now()
	if s.opts.OnStart != nil {
		s.opts.OnStart(a.rec) // readable while it runs
	}
	// The line leaves the prompt; its C mark goes to the relay, not the
	// terminal, so say so here. The next command waits for the next prompt.
	s.promptUp, s.fresh, s.promptDue, s.lateInput = false, false, true, false
	for _, h := range s.held {
		if h.intr != "" {
			// Sent right after the line: it interrupts the agent's command.
			a.rec.Interrupt = &Interrupt{By: "human", Key: h.intr, Viewer: h.viewer}
		}
		s.touched(a, h.viewer, h.p, h.enters, h.echoed, h.intr, a.rec.Started)
	}
	held := s.takeHeld()
	if len(held) > 0 {
		// Keys of the human's reach the terminal with the line: the
		// agent's wait until they were read (awaitHumanRead).
		a.humanKeys, a.humanLineEnd = true, held[len(held)-1] == '\r' || held[len(held)-1] == '\n'
		a.humanSeq++
	}
	// An interrupt key acts the moment the terminal receives it, and
	// drops what the shell has not read yet, the accept key included: it
	// waits, with what follows it, until the command has started.
	if i := bytes.IndexAny(held, interruptKeys); i >= 0 {
		held, a.later = held[:i], held[i:]
	}
	s.mu.Unlock()
	if _, err := s.conn.Write(append([]byte(keyAccept), held...)); err != nil {
		return fmt.Errorf("exec: accept: %w", err)
	}
	return nil
}

// interrupt presses Ctrl-C for the agent's command once a program of it
// holds the terminal (see releaseLater): a Ctrl-C before the line runs
// would abort it unseen, and drop the keys the shell had not read yet.
func (s *Shell) interrupt(a *agentRun) error {
	s.writeMu.Lock()
	s.mu.Lock()
	if a.phase == phaseAccepted {
		a.later = append(a.later, 3)
		if a.started {
			s.releaseLater(a)
		}
		s.mu.Unlock()
		s.writeMu.Unlock()
		return nil
	}
	s.mu.Unlock()
	defer s.writeMu.Unlock()
	_, err := s.conn.Write([]byte{3})
	return err
}

// awaitProgram waits, briefly, until a program of the agent's command
// can take a Ctrl-C (see ProgramReporter): bash prints the start mark
// before it forks, and a Ctrl-C that reaches bash while it waits for a
// child, or the child before it has left bash's handler, interrupts
// nothing. A command of builtins only never hands the terminal over: once
// the shell has held it for shellHolds, bash takes the key itself.
// Without a way to see the foreground it waits a moment instead.
func (s *Shell) awaitProgram(a *agentRun) {
	pr, ok := s.conn.(ProgramReporter)
	if !ok {
		time.Sleep(50 * time.Millisecond)
		return
	}
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		done := a.phase == phaseDone
		s.mu.Unlock()
		if done {
			return
		}
		sh, ready, err := pr.InterruptReady(pid)
		waited := time.Since(start)
		if err != nil || ready || (sh && waited > shellHolds) || waited > programWait {
			return
		}
	}
}

// shellHolds is how long the shell may keep the terminal after the
// agent's command started before a Ctrl-C goes to bash itself;
// programWait bounds the wait for a program that holds it to take one.
const (
	shellHolds  = 300 * time.Millisecond
	programWait = time.Second
)

// interruptKeys are the keys a terminal turns into signals: Ctrl-C,
// Ctrl-Z and Ctrl-\.
const interruptKeys = "\x03\x1a\x1c"

// releaseLater sends the viewer input held back until the agent's command
// started (or ended); s.mu is held. It writes on its own goroutine, under
// the write lock, and input that comes meanwhile queues behind it.
func (s *Shell) releaseLater(a *agentRun) {
	if len(a.later) == 0 || a.releasing {
		return
	}
	a.releasing = true
	go func() {
		s.awaitProgram(a)
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		s.mu.Lock()
		b := a.later
		a.later, a.releasing = nil, false
		s.mu.Unlock()
		if _, err := s.conn.Write(b); err != nil {
			s.log.Warn("shell: send held input", "err", err)
		}
	}()
}

// abandon gives up a run that never reached the accept key and releases
// the input held for it. A line the shell staged anyway is unstaged when
// its "staged" mark arrives (see private).
func (s *Shell) abandon(a *agentRun) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.agent == a {
		s.agent = nil
		a.closeOut()
	}
	held := s.takeHeld()
	s.changed.Broadcast()
	s.mu.Unlock()
	if len(held) > 0 {
		_, _ = s.conn.Write(held)
	}
}

// takeHeld returns and clears the held human input, crediting its Enter
// keys; s.mu is held.
func (s *Shell) takeHeld() []byte {
	var b []byte
	now := time.Now()
	for _, h := range s.held {
		b = append(b, h.p...)
		s.addCredits(h.viewer, h.enters, now)
	}
	s.held = nil
	return b
}

// settle waits, bounded, while the shell is on its way to an idle prompt:
// a command just ended and its prompt is coming, or a line typed ahead is
// about to run. Back-to-back calls then never see a spurious busy, and an
// agent line never races a typed-ahead one; s.mu is held.
func (s *Shell) settle(ctx context.Context) {
	deadline := time.Now().Add(stageTimeout)
	for s.agent == nil && s.human == nil && s.err == nil && !s.idlePrompt() {
		var until time.Time
		switch {
		case s.promptDue || (s.fresh && !s.promptUp) || s.fixLine != "" || (!s.promptUp && !s.cont && len(s.typed) > 0) || s.aheadPending():
			// A prompt is on its way, or a line the human submitted is
			// about to start (its command-start mark, or a new prompt).
			until = deadline
		case s.promptUp && !s.cont && len(s.credits) > 0:
			until = s.creditsStaleAt()
			if until.After(deadline) {
				until = deadline
			}
		default:
			return // a half-typed or continued line: busy
		}
		d := time.Until(until)
		if d <= 0 || !time.Now().Before(deadline) {
			return
		}
		// The condition must be false now: a true one returns at once,
		// without letting the terminal reader in. A prompt drawn or left
		// meanwhile is a new case, and so are the human's held keys let go
		// (aheadPending): look again (typed-ahead Enters go stale on their
		// own clock).
		up := s.promptUp
		cont := s.cont
		ahead := s.aheadPending()
		err := s.waitUntil(ctx, d, func() bool {
			return s.idlePrompt() || s.agent != nil || s.human != nil || s.promptUp != up || s.cont != cont || s.aheadPending() != ahead
		})
		if err != nil && !errors.Is(err, errDeadline) {
			return
		}
	}
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
// and SIGKILL to the terminal's foreground process group, grace apart
// (zero means DefaultCancelGrace).
func (s *Shell) Cancel(ctx context.Context, grace time.Duration) (Record, error) {
	if grace <= 0 {
		grace = DefaultCancelGrace
	}
	s.mu.Lock()
	a := s.agent
	pid := s.pid
	if a == nil && s.lost == "" && s.human != nil && !s.replacedNow() { // the human's exec, not seen yet (SSH)
		if what := s.nestedNow(); what != "" {
			err := s.nestedError("cancel", what)
			s.mu.Unlock()
			return Record{}, err
		}
	}
	s.mu.Unlock()
	if a == nil {
		if lost := s.lostReason(); lost != "" {
			return Record{}, fmt.Errorf("cancel: %w: %s", ErrIntegrationLost, lost)
		}
		return Record{}, ErrNotRunning
	}
	steps := []struct {
		how  Interrupt
		send func() error
	}{
		{Interrupt{By: "agent", Key: "Ctrl-C"}, func() error { return s.interrupt(a) }},
		{Interrupt{By: "agent", Key: "Ctrl-C", Signal: "SIGTERM"}, func() error { return s.conn.SignalForeground(ctx, pid, syscall.SIGTERM) }},
		{Interrupt{By: "agent", Key: "Ctrl-C", Signal: "SIGKILL"}, func() error { return s.conn.SignalForeground(ctx, pid, syscall.SIGKILL) }},
	}
	noProgram := 0 // signal steps that found the shell itself holding the terminal
	for _, step := range steps {
		s.mu.Lock()
		if a.phase != phaseDone {
			how := step.how
			a.rec.Interrupt = &how
		}
		s.mu.Unlock()
		// No foreground job means the command just ended: wait for its end.
		err := step.send()
		switch {
		case errors.Is(err, ErrNoForeground):
			noProgram++
		case errors.Is(err, ErrConnectionLost) || errors.Is(err, ErrShellExited) || errors.Is(err, context.Canceled):
			return Record{}, fmt.Errorf("cancel: %w", err)
		case err != nil:
			return Record{}, fmt.Errorf("cancel: %w: tandem could not interrupt the command (%s): %v", ErrUnresponsive, step.how.Key+step.how.Signal, err)
		}
		s.mu.Lock()
		err = s.waitUntil(ctx, grace, func() bool { return a.phase == phaseDone || s.agent != a })
		rec := a.partial()
		s.mu.Unlock()
		if err == nil {
			return rec, nil
		}
		if !errors.Is(err, errDeadline) {
			return Record{}, fmt.Errorf("cancel: %w", err)
		}
	}
	if noProgram == 2 && !s.stopped() {
		// No program held the terminal at either signal, yet the command
		// never ended: the shell is at a prompt of its own that tandem's
		// integration does not mark (exec replaced the shell, or PS1 and
		// PROMPT_COMMAND were both replaced).
		s.mu.Lock()
		s.lost = "the command ended but the shell did not report it: a command replaced the shell (exec) or its prompt and hooks"
		rec := a.partial()
		if s.agent == a {
			a.hooks = true
			s.endAgent(a, nil, true)
			rec = a.rec
		}
		s.mu.Unlock()
		return rec, fmt.Errorf("cancel: %w: %s", ErrIntegrationLost, s.lost)
	}
	return Record{}, fmt.Errorf("cancel: %w: the command survived Ctrl-C, SIGTERM and SIGKILL%s", ErrUnresponsive, s.stoppedNote())
}

// StopReporter is implemented by a Conn that can tell whether the shell
// process is stopped (SIGSTOP): such a shell answers nothing until it is
// continued.
type StopReporter interface {
	ShellStopped(shellPID int) (bool, error)
}

// stopped reports whether the backend says the shell process is stopped.
func (s *Shell) stopped() bool {
	sr, ok := s.conn.(StopReporter)
	if !ok {
		return false
	}
	st, err := sr.ShellStopped(s.PID())
	return err == nil && st
}

// stoppedNote says, for an error message, that the shell is stopped, when
// the backend can tell.
func (s *Shell) stoppedNote() string {
	sr, ok := s.conn.(StopReporter)
	if !ok {
		return " (is it stopped, or stuck in a key binding or a slow PROMPT_COMMAND?)"
	}
	pid := s.PID()
	if st, err := sr.ShellStopped(pid); err == nil && st {
		return fmt.Sprintf(" (the shell process, pid %d, is stopped: continue it with kill -CONT %d, or reconnect)", pid, pid)
	}
	return " (is it stuck in a key binding or a slow PROMPT_COMMAND?)"
}

// replaced reports whether the shell process now runs another program
// (the agent's command ran exec), and if so ends a's capture and marks
// the integration lost.
func (s *Shell) replaced(a *agentRun) bool {
	rr, ok := s.conn.(ReplaceReporter)
	if !ok {
		return false
	}
	if r, err := rr.ShellReplaced(s.PID()); err != nil || !r {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lost = "the shell process was replaced by another program (exec), which does not run tandem's integration"
	if s.agent == a {
		a.hooks = true
		s.endAgent(a, nil, true)
	}
	return true
}

// lostReason says why the integration is lost, or "".
func (s *Shell) lostReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// ErrUnresponsive says the shell or its command does not respond to what
// tandem tried (Ctrl-C, SIGTERM, SIGKILL, a key binding): a stopped or
// wedged shell.
var ErrUnresponsive = errors.New("shell unresponsive")

// want answers the shell's request for the staged line; s.mu is held. It
// runs on the terminal reader, so the write goes to the relay writer.
func (s *Shell) want() {
	a := s.agent
	rec := []byte("- 0\n") // nothing wanted any more: the shell stages nothing
	// Not for a line the human's typed-ahead command has preempted: its
	// call is giving up, and a line staged now would sit on the prompt
	// until its unstage key came, behind the next call's stage key.
	if a != nil && a.phase == phaseStaging && !a.sent && !a.preempt {
		a.sent = true
		hdr := a.rec.ID + " " + strconv.Itoa(len(a.rec.Command))
		if p := s.nextPair(); p > 0 {
			hdr += " " + strconv.Itoa(p) // new FIFOs: a background job holds these
		}
		rec = append([]byte(hdr+"\n"), a.rec.Command...)
	}
	select {
	case s.stageq <- rec:
	default:
		// The writer is stuck; the shell times out its read and says so.
		s.log.Warn("shell: stage writer busy, dropping a staged line")
	}
}

// maxLastLine bounds what lastLine returns.
const maxLastLine = 256

// lastLine is the last line of out without its line end, as plain text:
// a terminal's escape sequences and carriage-return redraws removed.
func lastLine(out []byte) string {
	out = bytes.TrimRight(out, "\r\n")
	if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	if i := bytes.LastIndexByte(out, '\r'); i >= 0 {
		out = out[i+1:]
	}
	line := term.StripString(string(bytes.ToValidUTF8(out, []byte("\uFFFD"))))
	if len(line) > maxLastLine {
		line = strings.ToValidUTF8(line[len(line)-maxLastLine:], "")
	}
	return line
}
