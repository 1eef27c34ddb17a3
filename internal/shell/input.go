package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
)

// altScreen follows whether the terminal shows the alternate screen, where
// full-screen programs (vim, less, top) draw, from the bytes viewers see.
type altScreen struct {
	on   bool
	ons  int    // counts the chunks that switch it on (see fullScreenLocked)
	tail []byte // the end of the last chunk, which may start a switch
}

// The switches to and from the alternate screen (xterm's 1049, 1047, 47).
var (
	altOn  = [][]byte{[]byte("\x1b[?1049h"), []byte("\x1b[?1047h"), []byte("\x1b[?47h")}
	altOff = [][]byte{[]byte("\x1b[?1049l"), []byte("\x1b[?1047l"), []byte("\x1b[?47l")}
)

// feed reads one chunk of terminal output.
func (a *altScreen) feed(p []byte) {
	if bytes.IndexByte(p, 0x1b) < 0 && len(a.tail) == 0 {
		return
	}
	b := append(a.tail, p...)
	last, on := -1, a.on
	for _, m := range altOn {
		if i := bytes.LastIndex(b, m); i > last {
			last, on = i, true
			a.ons++
		}
	}
	for _, m := range altOff {
		if i := bytes.LastIndex(b, m); i > last {
			last, on = i, false
		}
	}
	a.on = on
	a.tail = nil
	if i := bytes.LastIndexByte(b, 0x1b); i >= 0 && len(b)-i < len(altOn[0]) {
		a.tail = bytes.Clone(b[i:])
	}
}

// ProgramNamer is implemented by a Conn that can name the program holding
// the terminal (a local PTY can), for a full-screen program's report.
type ProgramNamer interface {
	ForegroundProgram() (string, error)
}

// InputState is what a running command does with the terminal: whether it
// waits for a key the agent could send, and what it shows.
type InputState struct {
	// Known says whether the backend could tell WaitingForInput.
	Known bool
	// WaitingForInput is true when the command is blocked reading the
	// terminal: a prompt, a REPL, /dev/tty opened by getpass.
	WaitingForInput bool
	// LastLine is the last line the command printed, often the prompt.
	LastLine string
	// FullScreen is true while a program shows the alternate screen
	// (vim, less, top); Program names it when the backend can.
	FullScreen bool
	Program    string
}

// State reports what the agent's running command id does with the
// terminal; ok is false when id is not the running command.
func (s *Shell) State(id string) (InputState, bool) {
	s.mu.Lock()
	a := s.agent
	if a == nil || a.rec.ID != id || a.phase != phaseAccepted {
		s.mu.Unlock()
		return InputState{}, false
	}
	st := InputState{LastLine: s.redactText(lastLine(a.lastOut)), FullScreen: s.fullScreenLocked(a)}
	s.mu.Unlock()
	s.probeInput(&st)
	return st, true
}

// probeInput asks the backend whether the command waits for input and, on
// a full screen, which program shows it (see probeInputCtx), for a reply
// that is about to go: over SSH it waits at most probeReplyMax.
func (s *Shell) probeInput(st *InputState) {
	s.probeInputCtx(context.Background(), st, probeReplyMax)
}

// probeReplyMax bounds the look over SSH that a reply waits for.
const probeReplyMax = 300 * time.Millisecond

// probeConn is probeInput for a backend that sees the terminal itself.
func (s *Shell) probeConn(st *InputState) {
	if iw, ok := s.conn.(InputWaiter); ok {
		if w, err := iw.WaitingForInput(); err == nil {
			st.Known, st.WaitingForInput = true, w
		}
	}
	if pn, ok := s.conn.(ProgramNamer); ok && st.FullScreen {
		if name, err := pn.ForegroundProgram(); err == nil {
			st.Program = name
		}
	}
}

// EchoUnknown is SendInput's answer when the backend cannot tell whether
// the terminal echoes (it has no reporter, or the look failed): callers
// treat the input as secret.
const EchoUnknown = -1

// SendInput types input into the terminal for the agent's running command
// id: keys it reads, such as an answer at a prompt. It never reaches a
// command that is not the agent's own, nor the shell's prompt: what the
// command leaves unread is discarded when it ends (see agentkeys.go), and
// signal keys are refused while the terminal acts on them. It reports
// whether the terminal echoed the keys (1), hid them (0, a password
// prompt), or cannot tell (EchoUnknown).
func (s *Shell) SendInput(ctx context.Context, id string, input []byte) (echo int, err error) {
	s.mu.Lock()
	a := s.agent
	if a == nil || a.rec.ID != id || a.phase < phaseAccepted || a.inputClosed {
		s.mu.Unlock()
		return 0, fmt.Errorf("send input: %w: %s is not the agent's running command", ErrNotRunning, id)
	}
	// Keys typed before the line runs would be read by the shell itself.
	err = s.waitUntil(ctx, stageTimeout, func() bool { return a.started || a.phase == phaseDone })
	done := a.phase == phaseDone || a.inputClosed
	s.mu.Unlock()
	switch {
	case errors.Is(err, errDeadline):
		return 0, fmt.Errorf("send input: %w: the command has not started", ErrUnresponsive)
	case err != nil:
		return 0, fmt.Errorf("send input: %w", err)
	case done:
		return 0, fmt.Errorf("send input: %w: %s has ended", ErrNotRunning, id)
	}
	if err := s.refuseSignalKeys(input); err != nil {
		return 0, err
	}
	if err := s.awaitHumanRead(ctx, a); err != nil {
		return 0, err
	}
	echo = s.inputEcho(ctx)
	s.refreshRedact()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.agent != a || a.phase != phaseAccepted || a.inputClosed {
		s.mu.Unlock()
		return 0, fmt.Errorf("send input: %w: %s has ended", ErrNotRunning, id)
	}
	if a.humanKeys {
		// The human typed again since awaitHumanRead looked.
		s.mu.Unlock()
		return 0, &BusyError{Kind: BusyHumanInput, Reason: "the human typed into this command and it has not read all of it yet", CommandID: a.rec.ID, Command: a.rec.Command, Since: a.rec.Started}
	}
	// From now until the command's leftovers are discarded, the human's
	// keys wait in tandem. Set before the write: the drain decision,
	// taken under s.mu, sees it.
	s.src.agentKeys = true
	s.src.agentSeq++
	if len(input) > 0 {
		s.src.agentLineEnd = input[len(input)-1] == '\r' || input[len(input)-1] == '\n'
	}
	if s.opts.Input != nil && echo == 1 {
		if s.inputRed != nil {
			_, _ = s.inputRed.Write(input)
		} else {
			s.opts.Input(input)
		}
	}
	s.mu.Unlock()
	if _, err := s.conn.Write(input); err != nil {
		return 0, fmt.Errorf("send input: %w", err)
	}
	return echo, nil
}

// RedactText replaces the session's secrets in a text the agent typed,
// for the audit: the same redaction as output.
func (s *Shell) RedactText(t string) string {
	s.refreshRedact()
	return s.redactText(t)
}

// Wait waits, with the shell's state locked, until cond holds, ctx ends
// or d passes; cond is evaluated again after every terminal event and
// every piece of output. It reports whether cond held.
func (s *Shell) Wait(ctx context.Context, d time.Duration, cond func() bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitUntil(ctx, d, cond) == nil
}
