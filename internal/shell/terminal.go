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
			if cerr := s.conn.Err(); cerr != nil {
				s.fail(cerr)
			} else if !errors.Is(err, io.EOF) {
				s.fail(err)
			} else {
				s.fail(nil)
			}
			return
		}
	}
}

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
	_, _ = s.scrollback.Write(p)
	_, _ = s.live.Write(p)
	if s.opts.Output != nil {
		s.opts.Output(p)
	}
	for v := range s.viewers {
		v.poke()
	}
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
// after it, so they can never merge into the agent's line.
func (s *Shell) Input(ctx context.Context, p []byte) error {
	echoed := true
	if er, ok := s.conn.(EchoReporter); ok {
		if e, err := er.InputEchoed(); err == nil {
			echoed = e
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	if s.opts.Input != nil && echoed {
		s.opts.Input(p)
	}
	s.inputAt = time.Now()
	// A submitted line leaves the prompt; a half-typed one is the stage
	// function's to notice (it sees readline's buffer).
	if s.agent == nil && bytes.ContainsAny(p, "\r\n\x03\x04") {
		if !s.atPrompt && s.human == nil && bytes.ContainsAny(p, "\r\n") {
			// Typed ahead of the prompt: the prompt about to be drawn
			// reads this line, so it is not an idle prompt.
			s.typedAhead = true
		}
		s.atPrompt = false
	}
	if a := s.agent; a != nil && a.phase < phaseAccepted {
		s.held = append(s.held, bytes.Clone(p))
		s.mu.Unlock()
		return nil
	}
	s.creditEnters(p)
	s.mu.Unlock()
	if _, err := s.conn.Write(p); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	return nil
}

// maxCredits bounds the Enter keys remembered, so a long-idle session does
// not accumulate an allowance for forged marks.
const maxCredits = 64

// creditEnters counts the Enter keys in viewer input that reaches the
// terminal: each may start one human command; s.mu is held.
func (s *Shell) creditEnters(p []byte) {
	s.credits = min(s.credits+bytes.Count(p, []byte("\r"))+bytes.Count(p, []byte("\n")), maxCredits)
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
