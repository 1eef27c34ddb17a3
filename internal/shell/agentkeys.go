package shell

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Keys from two sources reach one terminal: the human's (Input) and the
// agent's (SendInput), which go only to the agent's own running command.
// The terminal's input queue cannot say whose a byte is, and what the
// command leaves unread is read by the shell at its next prompt. So:
//
//   - One source in the queue at a time. From the agent's first key in a
//     command until its keys are read or discarded, the human's keys wait
//     in tandem (aheadHeld); an interrupt key goes at once, as it empties
//     the queue anyway. Where the queue can be measured (InputQueuer, a
//     local PTY), they go as soon as it is empty (watchAgentRead); over
//     SSH, when the command ends. Keys the human typed into the command
//     before the agent's must have been read before the agent's go: a
//     local queue is measured; over SSH the agent's keys are refused
//     (BusyHumanInput).
//   - Discard at the command's end. tandem takes no more of the agent's
//     keys for a line once it ended (its end mark on the relay, or the
//     rc's request, X;drain, sent with its P mark), and answers on the
//     rc's private "in" FIFO, never the terminal: "keep" when no agent
//     key can be unread, "drain" with a token otherwise, and types
//     RS TOKEN US behind the agent's keys: the rc reads the terminal up to
//     it, so every key of the agent's is gone however late it arrived (over
//     SSH), and says "drained" (X;drained); then the human's held keys go.
//     With no answer within 2 s, the rc empties the queue until it stays
//     empty for 30 ms. Where tandem can empty the queue itself (InputFlusher,
//     a local PTY), it does, and answers "keep". The answer is mostly
//     there before the rc asks for it, so a command's latency barely
//     changes.
//   - Signal keys. While the terminal turns Ctrl-C, Ctrl-Z and Ctrl-\ into
//     signals (ISIG), the agent's input may not hold them: a signal
//     empties the queue and stops or ends the command, and what follows
//     would reach the shell. ssh_cancel interrupts a command.

// InputFlusher is implemented by a Conn that can discard what the
// terminal's input queue holds unread (a local PTY can): the agent's keys
// its command did not read are dropped by tandem, exactly, before the
// shell reads its next line.
type InputFlusher interface {
	FlushInput() error
}

// InputQueuer is implemented by a Conn that can measure the terminal's
// input queue (a local PTY can): n is what a read could take now; in
// canonical mode, a line still being typed is not counted.
type InputQueuer interface {
	InputQueue() (n int, canonical bool, err error)
}

// SignalKeyReporter is implemented by a Conn that can read the terminal's
// modes (a local PTY can): the keys it turns into signals now, none when
// ISIG is off (a full-screen program, a raw-mode REPL).
type SignalKeyReporter interface {
	SignalKeys() ([]byte, error)
}

// ErrInvalidInput wraps SendInput's refusal of keys the agent may not
// send (a signal key): the caller's input is wrong, not the shell.
var ErrInvalidInput = errors.New("invalid input")

// defaultSignalKeys are Ctrl-C, Ctrl-\ and Ctrl-Z, the signal keys of a
// terminal whose modes tandem cannot read (SSH).
const defaultSignalKeys = "\x03\x1c\x1a"

// humanReadWait bounds how long SendInput waits, on a local terminal,
// for the command to read the keys the human typed into it.
const humanReadWait = time.Second

// keySources is the shell's account of whose keys may sit unread in the
// terminal's input queue; s.mu guards it.
type keySources struct {
	// agentKeys: the agent typed since the last drain, so its keys may be
	// unread.
	agentKeys bool
	// agentSeq counts the agent's writes; agentLineEnd says whether the
	// last ended a line (see watchAgentRead).
	agentSeq     int
	agentLineEnd bool
	watching     bool   // watchAgentRead runs
	answered     string // the agent line last answered (endOfInput)
	// drainEcho is the terminal's echo of the drain token typed behind
	// the agent's keys, kept off the viewers' screens.
	drainEcho []byte
	echoTail  []byte // output held back that may begin drainEcho
	// aheadHeld is the human's input held while agentKeys holds, or on
	// its way to the terminal (releasing).
	aheadHeld []heldInput
	releasing bool
}

// keyName names a signal key for a message.
func keyName(k byte) string {
	switch k {
	case 0x03:
		return "Ctrl-C"
	case 0x1a:
		return "Ctrl-Z"
	case 0x1c:
		return `Ctrl-\`
	}
	return fmt.Sprintf("Ctrl-%c", k+'@')
}

// signalKeys are the keys the terminal turns into signals now.
func (s *Shell) signalKeys() []byte {
	if sk, ok := s.conn.(SignalKeyReporter); ok {
		if k, err := sk.SignalKeys(); err == nil {
			return k
		}
	}
	return []byte(defaultSignalKeys)
}

// refuseSignalKeys refuses agent input holding a signal key while the
// terminal acts on it.
func (s *Shell) refuseSignalKeys(input []byte) error {
	keys := s.signalKeys()
	i := bytes.IndexAny(input, string(keys))
	if i < 0 {
		return nil
	}
	return fmt.Errorf("send input: %w: the input holds %s (byte 0x%02x at offset %d), which the terminal turns into a signal: it would stop or end the command and let the keys after it reach the shell's prompt. Call ssh_cancel to interrupt your command; in a full-screen or raw-mode program these are plain keys and pass",
		ErrInvalidInput, keyName(input[i]), input[i], i)
}

// awaitHumanRead waits, on a terminal whose queue tandem can measure, until
// the keys the human typed into a's command were read; it refuses the
// agent's keys when that cannot be known, since the command's leftovers
// are discarded whole at its end.
func (s *Shell) awaitHumanRead(ctx context.Context, a *agentRun) error {
	iq, measurable := s.conn.(InputQueuer)
	deadline := time.Now().Add(humanReadWait)
	for {
		s.mu.Lock()
		typed, seq, lineEnd := a.humanKeys, a.humanSeq, a.humanLineEnd
		s.mu.Unlock()
		if !typed {
			return nil
		}
		if measurable {
			// Under the write lock no key of the human's is on its way in.
			s.writeMu.Lock()
			n, canon, err := iq.InputQueue()
			s.writeMu.Unlock()
			if err == nil && n == 0 && (!canon || lineEnd) {
				s.mu.Lock()
				if a.humanSeq == seq {
					a.humanKeys = false
				}
				s.mu.Unlock()
				continue
			}
		}
		if !measurable || !time.Now().Before(deadline) {
			return &BusyError{Kind: BusyHumanInput, Reason: "the human typed into this command and it has not read all of it yet", CommandID: a.rec.ID, Command: a.rec.Command, Since: a.rec.Started}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("send input: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// holdAhead takes viewer input while the agent's keys may be unread in the
// queue: it waits in tandem until they are discarded. An interrupt key the
// terminal acts on goes now, as it would empty the queue anyway (and with
// it, what was held before it); what follows it is held. It returns what
// Input is still to send, and whether anything is; s.mu is held.
func (s *Shell) holdAhead(p []byte, viewer string, echoed bool, ks keyScan) ([]byte, keyScan, bool) {
	if !s.src.agentKeys && !s.src.releasing {
		return p, ks, true
	}
	i := -1
	if ks.intr != "" && !s.src.releasing {
		i = bytes.LastIndexAny(p, string(s.signalKeys()))
	}
	if i < 0 {
		s.src.aheadHeld = append(s.src.aheadHeld, heldInput{p: bytes.Clone(p), viewer: viewer, enters: ks.enters, echoed: echoed})
		s.watchAgentRead()
		return nil, ks, false
	}
	s.src.aheadHeld = nil // what the key empties from the queue
	if rest := p[i+1:]; len(rest) > 0 {
		s.src.aheadHeld = append(s.src.aheadHeld, heldInput{p: bytes.Clone(rest), viewer: viewer, enters: countEnters(rest), echoed: echoed})
	}
	ks.enters = countEnters(p[:i+1])
	return p[:i+1], ks, true
}

// agentReadPoll is how often watchAgentRead measures the queue.
const agentReadPoll = 10 * time.Millisecond

// watchAgentRead lets the human's held keys go as soon as the command has
// read every key the agent sent, on a terminal whose queue tandem can
// measure: a human typing into the agent's REPL waits only while the
// agent's keys are unread; s.mu is held.
func (s *Shell) watchAgentRead() {
	iq, ok := s.conn.(InputQueuer)
	if !ok || s.src.watching {
		return
	}
	s.src.watching = true
	go func() {
		for {
			time.Sleep(agentReadPoll)
			s.mu.Lock()
			if !s.src.agentKeys || len(s.src.aheadHeld) == 0 || s.err != nil || s.agent == nil || s.agent.inputClosed {
				s.src.watching = false
				s.mu.Unlock()
				return
			}
			seq, lineEnd := s.src.agentSeq, s.src.agentLineEnd
			s.mu.Unlock()
			// Under the write lock no agent key is on its way in.
			s.writeMu.Lock()
			n, canon, err := iq.InputQueue()
			s.writeMu.Unlock()
			if err != nil || n != 0 || (canon && !lineEnd) {
				continue
			}
			s.mu.Lock()
			if s.src.agentKeys && s.src.agentSeq == seq && s.agent != nil && !s.agent.inputClosed {
				s.src.agentKeys = false
				s.releaseAhead()
			}
			s.mu.Unlock()
		}
	}()
}

// countEnters counts line ends, for input split off a scanned piece.
func countEnters(p []byte) int {
	return bytes.Count(p, []byte{'\r'}) + bytes.Count(p, []byte{'\n'})
}

// endOfInput takes no more of the agent's keys for a, whose line ended
// (its end mark, or the rc's drain request, whichever tandem reads
// first), and answers the rc once: "keep" when none of the agent's keys
// can be unread, else "drain", or, where tandem can empty the queue
// itself, "keep" once it has; s.mu is held.
func (s *Shell) endOfInput(a *agentRun) {
	a.inputClosed = true
	if a.answered {
		return
	}
	a.answered = true
	s.answerFor(a.rec.ID)
}

// drainMark handles the rc's drain request for the agent line id, before
// the shell reads its next line; s.mu is held (the terminal reader).
func (s *Shell) drainMark(id string) {
	if a := s.agent; a != nil && a.rec.ID == id {
		s.endOfInput(a)
		return
	}
	if id != "" && id == s.src.answered {
		return // answered at its end mark
	}
	s.answerFor(id)
}

// answerFor decides and answers for the agent line id; s.mu is held.
func (s *Shell) answerFor(id string) {
	s.src.answered = id
	if !s.src.agentKeys {
		s.answerDrain(id, answerKeep)
		return
	}
	fl, ok := s.conn.(InputFlusher)
	if !ok {
		// The rc empties the queue up to a mark tandem types behind the
		// agent's keys: a fresh token the agent cannot have typed first.
		var b [8]byte
		_, _ = rand.Read(b[:])
		tok := hex.EncodeToString(b[:])
		s.answerDrain(id, answerDrain+" "+tok)
		s.src.drainEcho = []byte("^^" + tok + "^_") // as the terminal echoes it
		go func() {
			s.writeMu.Lock()
			defer s.writeMu.Unlock()
			if _, err := s.conn.Write([]byte("\x1e" + tok + "\x1f")); err != nil {
				s.log.Warn("shell: drain mark", "err", err)
			}
		}()
		return
	}
	// Once every agent key written is in the queue (the write lock),
	// tandem empties it, lets the human's keys go, and the rc goes on.
	go func() {
		s.writeMu.Lock()
		err := fl.FlushInput()
		s.writeMu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.log.Warn("shell: could not empty the terminal's input queue; the shell does", "err", err)
			s.answerDrain(id, answerDrain)
			return
		}
		s.answerDrain(id, answerKeep)
		s.drainedMark()
	}()
}

// The answers to a drain request, "KEY ID k" and "KEY ID d TOKEN": KEY is
// the nonce's first answerKeyLen characters, ID the line id's last
// answerIDLen. Short, as bash reads a FIFO a byte per read(2), and a key
// of 48 bits is beyond guessing (a program that reads the nonce from
// bash's memory can forge any mark anyway).
const (
	answerKeep   = "k"
	answerDrain  = "d"
	answerKeyLen = 12
	answerIDLen  = 8
)

// answerDrain writes an answer to a drain request; s.mu is held. The
// nonce and the line's id tell it from a staged line, and from an answer
// the shell stopped waiting for. It goes on a goroutine of its own, not
// behind writeStages: the shell is waiting for it.
func (s *Shell) answerDrain(id, answer string) {
	r := s.relay
	if r == nil {
		return // the shell times out and empties the queue itself
	}
	rec := []byte(s.nonce[:answerKeyLen] + " " + id[max(len(id)-answerIDLen, 0):] + " " + answer + "\n")
	go func() {
		s.stageMu.Lock()
		defer s.stageMu.Unlock()
		if _, err := r.Stage.Write(rec); err != nil {
			s.log.Warn("shell: drain answer", "err", err)
		}
	}()
}

// hideDrainEcho removes the echo of the drain token from terminal output;
// s.mu is held. While the echo is due, an end of p that may begin it is
// held back for the next read (echoTail), and shown once the drain is
// over if the echo never came (the terminal did not echo).
func (s *Shell) hideDrainEcho(p []byte) []byte {
	e := s.src.drainEcho
	if len(e) == 0 {
		return p
	}
	b := append(s.src.echoTail, p...)
	s.src.echoTail = nil
	if i := bytes.Index(b, e); i >= 0 {
		s.src.drainEcho = nil
		return append(b[:i:i], b[i+len(e):]...)
	}
	if k := markerPrefixLen(b, e); k > 0 {
		s.src.echoTail = bytes.Clone(b[len(b)-k:])
		b = b[:len(b)-k]
	}
	return b
}

// drainedMark handles the end of a drain: the queue held only the agent's
// keys and they are gone, so the human's held keys go to the terminal;
// s.mu is held.
func (s *Shell) drainedMark() {
	s.src.agentKeys = false
	s.src.drainEcho = nil
	if t := s.src.echoTail; len(t) > 0 {
		s.src.echoTail = nil
		s.display(t)
	}
	s.releaseAhead()
}

// releaseAhead writes the human's held input to the terminal, crediting
// its Enter keys; s.mu is held. Input that comes meanwhile queues behind.
func (s *Shell) releaseAhead() {
	if s.src.releasing || len(s.src.aheadHeld) == 0 {
		return
	}
	s.src.releasing = true
	go func() {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
		for {
			s.mu.Lock()
			held := s.src.aheadHeld
			s.src.aheadHeld = nil
			now := time.Now()
			var b []byte
			for _, h := range held {
				b = append(b, h.p...)
				s.addCredits(h.viewer, h.enters, now)
			}
			if len(b) == 0 {
				s.src.releasing = false
				s.changed.Broadcast()
				s.mu.Unlock()
				return
			}
			s.inputAt = now
			if a := s.agent; a != nil && a.phase == phaseAccepted {
				a.humanKeys, a.humanLineEnd = true, b[len(b)-1] == '\r' || b[len(b)-1] == '\n'
				a.humanSeq++
				for _, h := range held {
					s.touched(a, h.viewer, h.p, h.enters, h.echoed, lastInterrupt(h.p), now)
				}
			}
			s.mu.Unlock()
			if _, err := s.conn.Write(b); err != nil {
				s.log.Warn("shell: send held input", "err", err)
			}
		}
	}()
}

// keysLost ends the agent's input for a, which ended without the shell's
// hook (the shell was replaced, the integration is lost): no drain will
// come, so tandem empties the queue itself where it can, and the human's
// held keys go; s.mu is held.
func (s *Shell) keysLost(a *agentRun) {
	a.inputClosed, a.answered = true, true
	if !s.src.agentKeys {
		return
	}
	fl, ok := s.conn.(InputFlusher)
	if !ok {
		s.log.Warn("shell: the agent's unread keys stay in the terminal: the shell's integration is gone")
		s.drainedMark()
		return
	}
	go func() {
		s.writeMu.Lock()
		err := fl.FlushInput()
		s.writeMu.Unlock()
		if err != nil {
			s.log.Warn("shell: could not empty the terminal's input queue", "err", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.drainedMark()
	}()
}

// aheadPending reports whether human input waits in tandem for the
// agent's leftovers to go: the prompt is not idle, a typed-ahead line is
// coming; s.mu is held.
func (s *Shell) aheadPending() bool {
	return s.src.agentKeys || s.src.releasing || len(s.src.aheadHeld) > 0
}

// promptWithoutDrain handles a fresh prompt drawn while agent keys may be
// unread and no drain came (a command removed tandem's hooks): holding the
// human's keys longer protects nothing; s.mu is held.
func (s *Shell) promptWithoutDrain() {
	if !s.src.agentKeys {
		return
	}
	s.log.Warn("shell: the prompt came back without a drain of the agent's unread keys (were tandem's hooks removed?)")
	s.src.agentKeys = false
	s.releaseAhead()
}
