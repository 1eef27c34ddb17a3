package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tandem-sh/tandem/internal/term"
)

// ForegroundReporter is implemented by a Conn that can tell cheaply
// whether the shell itself holds the terminal's foreground (a local PTY
// can). An end mark printed while a program holds it is forged.
type ForegroundReporter interface {
	ShellInForeground() (bool, error)
}

// EchoReporter is implemented by a Conn that can see the terminal's modes.
// Keystrokes typed while the terminal does not echo them in canonical mode
// (a password prompt) are kept out of recordings.
type EchoReporter interface {
	InputEchoed() (bool, error)
}

// ReplaceReporter is implemented by a Conn that can tell whether the
// shell process still runs the bash tandem started (a local PTY can): a
// shell that ran exec lost tandem's integration with it.
type ReplaceReporter interface {
	ShellReplaced(shellPID int) (bool, error)
}

// InputWaiter is implemented by a Conn that can tell whether the running
// command is blocked reading the terminal (a local PTY can): such a
// command waits for an answer the agent cannot type.
type InputWaiter interface {
	WaitingForInput() (bool, error)
}

// endReasonWait bounds the wait, after the terminal ends, for the
// connection to say why.
const endReasonWait = 2 * time.Second

// maxHeldOut bounds the terminal output held back while an agent command's
// output catches up; past it the output is shown anyway.
const maxHeldOut = 1 << 20

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
			fg := s.shellInForeground(b)
			s.mu.Lock()
			s.fgShell = fg
			s.parser.Feed(b, s.item)
			s.mu.Unlock()
		}
		if err != nil {
			// The terminal ends before the process is reaped: wait briefly
			// for the connection's own account of why (an exit status).
			select {
			case <-s.conn.Done():
			case <-time.After(endReasonWait):
			}
			why := s.conn.Err()
			if why == nil && !errors.Is(err, io.EOF) {
				why = err
			}
			s.endHuman(why)
			s.mu.Lock()
			if s.viewRed != nil {
				_ = s.viewRed.Flush() // the terminal's last bytes, to the recording
			}
			s.mu.Unlock()
			s.fail(why)
			close(s.drained)
			return
		}
	}
}

// endHuman files the human command that was running when the terminal
// ended (exit, Ctrl-D, a killed shell): its end mark, if the shell's exit
// hook sent one, is in; otherwise the shell's own exit status is its
// status. It notes whether the human ended the shell.
func (s *Shell) endHuman(why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var exit *ExitError
	if !errors.As(why, &exit) {
		return
	}
	h := s.human
	// A shell whose integration is lost runs no command of the agent's:
	// only the human's keys reach it, so its own exit is theirs.
	lostExit := s.lost != "" && exit.Signal == ""
	s.humanExit = s.agent == nil && (h != nil || s.exitMark || lostExit || time.Since(s.eofAt) < endReasonWait+time.Second)
	if h == nil {
		return
	}
	if !h.ended {
		h.ended = true
		h.rec.ExitCode, h.rec.ExitKnown = exit.Status, exit.Signal == ""
		h.rec.Duration = time.Since(h.rec.Started)
	}
	s.finishHuman()
}

// EndedByHuman reports whether the shell exited while a human command ran
// or right after a viewer's Ctrl-D at the prompt: a human ended it.
func (s *Shell) EndedByHuman() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.humanExit
}

// Drained is closed once the terminal has ended and everything it showed
// was read, its last command filed included.
func (s *Shell) Drained() <-chan struct{} { return s.drained }

// shellInForeground samples, right after a read, whether the shell holds
// the terminal, for chunks that can carry marks. Without a way to tell
// (SSH), it says yes.
func (s *Shell) shellInForeground(b []byte) bool {
	fr, ok := s.conn.(ForegroundReporter)
	if !ok || bytes.IndexByte(b, 0x1b) < 0 {
		return true
	}
	fg, err := fr.ShellInForeground()
	return err != nil || fg
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

// display sends bytes to the scrollback, the viewers and the recording; s.mu is held.
func (s *Shell) display(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.holdOut && len(s.heldOut)+len(p) <= maxHeldOut {
		s.heldOut = append(s.heldOut, p...)
		return
	}
	s.flushHeldOut()
	s.show(p)
}

func (s *Shell) show(p []byte) {
	if len(p) == 0 {
		return
	}
	if s.viewRed != nil {
		_, _ = s.viewRed.Write(p) // on to showRedacted
		return
	}
	s.showRedacted(p)
}

// showRedacted is show once the viewers' redaction, if any, is done.
func (s *Shell) showRedacted(p []byte) {
	if len(p) == 0 {
		return
	}
	_, _ = s.scrollback.Write(p)
	_, _ = s.live.Write(p)
	s.alt.feed(p)
	if s.opts.Output != nil {
		s.opts.Output(p)
	}
	for v := range s.viewers {
		v.poke()
	}
	s.changed.Broadcast() // output waiters (Wait)
}

func (s *Shell) flushHeldOut() {
	s.holdOut = false
	if len(s.heldOut) > 0 {
		s.show(s.heldOut)
		s.heldOut = nil
	}
}

// Input types human keystrokes into the terminal. From an agent command's
// claim until its accept key is written, they are held and sent right
// after it, so they can never merge into the agent's line. WithViewer on
// ctx names who types.
func (s *Shell) Input(ctx context.Context, p []byte) error {
	echoed := s.inputEcho(ctx) == EchoOn // unknown: kept out, as a password
	viewer := viewerFrom(ctx)
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.opts.Input != nil && echoed {
		if s.inputRed != nil {
			_, _ = s.inputRed.Write(p)
		} else {
			s.opts.Input(p)
		}
	}
	now := time.Now()
	s.inputAt = now
	ks := s.keys.scan(p)
	var send bool
	if p, ks, send = s.holdAhead(p, viewer, echoed, ks); !send {
		s.mu.Unlock()
		return nil // sent once the agent's unread keys are gone
	}
	if a := s.agent; a != nil && a.phase == phaseAccepted && len(p) > 0 {
		// Keys into the agent's command: the agent's keys wait until
		// they were read (awaitHumanRead).
		a.humanKeys, a.humanLineEnd = true, p[len(p)-1] == '\r' || p[len(p)-1] == '\n'
		a.humanSeq++
	}
	if s.agent == nil && s.human == nil && (ks.intr != "" || ks.eof) {
		// At the prompt an interrupt discards the line, and the terminal
		// drops whatever was typed ahead; Ctrl-D may end the shell.
		s.promptUp = false
		if ks.intr != "" {
			s.credits = nil
		}
		if ks.eof {
			s.eofAt = now
		}
	}
	if a := s.agent; a != nil && a.phase >= phaseAccepted && ks.intr != "" {
		a.rec.Interrupt = &Interrupt{By: "human", Key: ks.intr, Viewer: viewer}
	}
	s.touched(s.agent, viewer, p, ks.enters, echoed, ks.intr, now)
	if a := s.agent; a != nil && a.phase == phaseAccepted && (len(a.later) > 0 || ks.intr != "") {
		// An interrupt key for the agent's command waits until a program
		// of it holds the terminal (see stage and releaseLater), and what
		// follows it waits behind it.
		a.later = append(a.later, p...)
		if a.started {
			s.releaseLater(a)
		}
		s.addCredits(viewer, ks.enters, now)
		s.mu.Unlock()
		return nil
	}
	if a := s.agent; a != nil && a.phase < phaseAccepted {
		s.held = append(s.held, heldInput{p: bytes.Clone(p), viewer: viewer, enters: ks.enters, intr: ks.intr, echoed: echoed})
		s.mu.Unlock()
		return nil
	}
	s.addCredits(viewer, ks.enters, now)
	s.mu.Unlock()
	if _, err := s.conn.Write(p); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	return nil
}

// heldInput is viewer input held back while an agent line is staged.
type heldInput struct {
	p      []byte
	viewer string
	enters int
	intr   string // the last interrupt key in p
	echoed bool   // the terminal echoed it when it was typed
}

// staleCredits is how long an Enter may wait unused while the shell shows
// it reads lines: bash reads a typed-ahead line the moment its prompt is
// drawn, so an Enter still unused after this most likely went to a program
// (a read, a REPL), not to a command line of the shell's. Most likely, not
// surely: a shell starved of CPU may take longer. So a stale Enter no
// longer keeps the prompt from counting as idle, but it is kept, and it
// still credits a line the shell reads; it is dropped only once the shell
// reads a stage key written after it (dropReadCredits).
const staleCredits = time.Second

// maxStageKeys bounds Shell.stageKeys: stage keys a program read instead
// of the shell are never answered.
const maxStageKeys = 64

// addCredits files the Enter keys of viewer input that reached the
// terminal: each may start one human command; s.mu is held.
func (s *Shell) addCredits(viewer string, n int, at time.Time) {
	for range n {
		s.credits = append(s.credits, credit{viewer: viewer, at: at, seq: s.creditSeq})
		s.creditSeq++
	}
}

// stageKeyWritten notes that a stage key goes to the terminal now, behind
// every Enter filed so far; s.mu is held.
func (s *Shell) stageKeyWritten() {
	if len(s.stageKeys) == maxStageKeys {
		s.stageKeys = s.stageKeys[1:]
	}
	s.stageKeys = append(s.stageKeys, s.creditSeq)
}

// dropReadCredits handles the shell reading a stage key (its "want"
// mark): the Enters typed before that key were all read, and any of them
// still unused went to a program, never to a line of the shell's. Keys a
// program read are never answered, so an answer is matched to the oldest
// key outstanding: that drops too few Enters, never too many; s.mu is
// held.
func (s *Shell) dropReadCredits() {
	if len(s.stageKeys) == 0 {
		return
	}
	before := s.stageKeys[0]
	s.stageKeys = s.stageKeys[1:]
	n := 0
	for n < len(s.credits) && s.credits[n].seq < before {
		n++
	}
	if n == 0 {
		return
	}
	s.log.Debug("shell: dropped Enter keys that no command line used (a program read them)", "keys", n)
	clear(s.credits[:n])
	s.credits = s.credits[n:]
	if len(s.credits) == 0 {
		s.credits = nil
	}
}

// useCredit takes the oldest unused Enter, for a line the shell read; s.mu
// is held.
func (s *Shell) useCredit() (credit, bool) {
	s.lastUse = time.Now()
	if len(s.credits) == 0 {
		return credit{}, false
	}
	c := s.credits[0]
	s.credits[0] = credit{}
	s.credits = s.credits[1:]
	if len(s.credits) == 0 {
		s.credits = nil // release a long paste's backing array
	}
	return c, true
}

// creditsStaleAt is when the unused Enters stop counting as typed ahead;
// s.mu is held.
func (s *Shell) creditsStaleAt() time.Time {
	last := s.lastUse
	if s.inputAt.After(last) {
		last = s.inputAt
	}
	return last.Add(staleCredits)
}

// idlePrompt reports whether the shell waits at a fresh prompt with no
// typed-ahead line to come; s.mu is held. Unused Enters that went stale
// do not count (see staleCredits).
func (s *Shell) idlePrompt() bool {
	if !s.promptUp || s.cont || s.fixLine != "" || s.aheadPending() {
		return false
	}
	return len(s.credits) == 0 || !time.Now().Before(s.creditsStaleAt())
}

// Resize changes the terminal size for every viewer.
func (s *Shell) Resize(ctx context.Context, cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("resize: %dx%d is out of range", cols, rows)
	}
	if err := s.conn.Resize(cols, rows); err != nil {
		return fmt.Errorf("resize: %w", err)
	}
	s.log.Debug("shell: terminal resized", "cols", cols, "rows", rows)
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
