package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/term"
)

// relayOpenTimeout bounds connecting to the shell's FIFOs.
const relayOpenTimeout = 15 * time.Second

// stageWriteTimeout bounds one write of a staged line to the "in" FIFO. The
// shell is reading when it is written (it asked), so only a wedged shell or
// transport makes it run out, and then the session is ended, not left stuck.
const stageWriteTimeout = 30 * time.Second

// maxEchoTail bounds what is kept of readline's redraw of an agent line,
// from which a syntax error's message is taken.
const maxEchoTail = 64 << 10

// openRelay connects the side channel once the shell reported its run dir.
func (s *Shell) openRelay(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), relayOpenTimeout)
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
	if s.promptUp {
		s.ready = true
	}
	s.pairs = []*pair{{ready: true}}
	go s.writeStages(r.Stage)
	go s.readRelay(r.Stdout, 0, 0)
	go s.readRelay(r.Stderr, 0, 1)
}

// writeStages writes the answers to the shell's "want" requests, in order.
// A write that cannot finish ends the session: a half-written record would
// leave the shell and tandem out of step for good.
func (s *Shell) writeStages(w io.Writer) {
	for {
		var rec []byte
		select {
		case rec = <-s.stageq:
		case <-s.conn.Done():
			return
		}
		done := make(chan error, 1)
		go func() {
			s.stageMu.Lock()
			defer s.stageMu.Unlock()
			_, err := w.Write(rec)
			done <- err
		}()
		t := time.NewTimer(stageWriteTimeout)
		var err error
		select {
		case err = <-done:
		case <-t.C:
			err = fmt.Errorf("%w: the shell stopped reading staged commands for %s", ErrConnectionLost, stageWriteTimeout)
		case <-s.conn.Done():
		}
		t.Stop()
		if err != nil {
			s.fail(fmt.Errorf("stage: %w", err))
			_ = s.conn.Close()
			return
		}
	}
}

// readRelay splits one stream of FIFO pair pn into agent output and
// background output, and mirrors it to the viewers, since it never passes
// through the terminal.
func (s *Shell) readRelay(r io.Reader, pn, stream int) {
	sc := newRelayScanner(s.nonce)
	view := term.NewParser("") // drops any stray mark on the way to viewers
	buf := make([]byte, 64<<10)
	var crlf []byte
	show := func(p []byte) {
		view.Feed(p, func(it term.Item) { s.show(it.Data) })
	}
	for {
		n, err := r.Read(buf)
		if n > 0 {
			fg := s.shellInForeground(buf[:n])
			s.mu.Lock()
			cur := pn == s.cur
			sc.feed(buf[:n], func(p []byte, ev *term.Event) {
				if ev != nil {
					if cur {
						s.relayEvent(stream, ev, fg)
					}
					return
				}
				a := s.agent
				st := streamWaiting
				if a != nil && cur {
					st = a.streams[stream]
				}
				switch st {
				case streamEcho:
					a.echoTail = appendBounded(a.echoTail, p, maxEchoTail)
					show(p)
				case streamCapture:
					if a.inPrompt[stream] {
						return // a prompt drawn into the capture: not output
					}
					_, _ = a.out[stream].Write(p)
					crlf = toCRLF(crlf[:0], p)
					if stream == 0 && a.streams[1] < streamCapture && len(a.outEarly)+len(crlf) <= maxEchoTail {
						// The command line's echo (on stderr) is still coming:
						// show the output after it.
						a.outEarly = append(a.outEarly, crlf...)
						return
					}
					show(crlf)
				default:
					// Output of a background job: after its command ended,
					// or on a pair agent lines no longer use.
					s.background(stream, p)
					if cur {
						s.rotate = true // something writes between commands
					}
					crlf = toCRLF(crlf[:0], p)
					show(crlf)
				}
			})
			s.mu.Unlock()
		}
		if err != nil {
			s.mu.Lock()
			s.pairs[pn].eof++
			s.changed.Broadcast()
			s.mu.Unlock()
			return
		}
	}
}

// relayEvent advances the current agent command on a trusted relay mark;
// s.mu is held. fg says whether the shell held the terminal when the mark
// was read. The shell writes its end marks from PROMPT_COMMAND, in the
// foreground; an end mark read while a program holds the terminal may be
// forged by that program (one that read the nonce from the shell's memory)
// or may be real, with a program of the user's PROMPT_COMMAND already in
// the foreground. Such a mark is tentative: output keeps being captured, a
// later end mark replaces it, and it counts once the shell shows its next
// prompt (see confirmEnds). A viewer's typing since the command began
// makes it count at once: their next command may hold the terminal.
func (s *Shell) relayEvent(stream int, ev *term.Event, fg bool) {
	a := s.agent
	if a == nil || a.phase < phaseStaging || a.phase == phaseDone {
		return
	}
	st := &a.streams[stream]
	trusted := fg || s.inputAt.After(a.rec.Started)
	if ev.Kind == term.Private && ev.Text == "eom" && *st != streamWaiting && *st != streamClosed {
		if !trusted {
			s.log.Warn("shell: an end mark arrived while a program held the terminal; it counts only once the prompt is back", "stream", stream)
			a.tentative[stream] = ev
			return
		}
		a.tentative[stream] = nil
	}
	if ev.Kind == term.PromptStart && *st == streamCapture && !trusted {
		s.log.Warn("shell: ignored a prompt mark in the relay printed while a program held the terminal")
		return
	}
	switch {
	case ev.Kind == term.Private && ev.Text == "ps2" && *st == streamEcho:
		// bash wants a continuation line: the command is incomplete. Ctrl-C
		// abandons it; nothing ran.
		if !a.incomplete {
			a.incomplete = true
			go s.abortContinuation(a)
		}
	case ev.Kind == term.Private && ev.Text == "bom":
		if ev.Fields["id"] != a.rec.ID || *st != streamWaiting {
			return
		}
		*st = streamCapture
		if stream == 1 {
			*st = streamEcho
		}
	case ev.Kind == term.InputStart && *st == streamEcho:
		a.echoTail = a.echoTail[:0]
	case ev.Kind == term.CommandStart && *st == streamEcho:
		*st = streamCapture
		a.echoTail = nil
		s.showEarly(a)
		a.started = true
		s.changed.Broadcast() // SendInput waits for this
		s.releaseLater(a)     // the command runs: a held Ctrl-C can reach it
	case ev.Kind == term.PromptStart && *st == streamCapture:
		// A prompt drawn into the capture: PROMPT_COMMAND no longer runs
		// tandem's hook, so fds 1 and 2 were never given back. The heal
		// key ends the command as the hook would, with its status and all
		// its output, and puts the hook back.
		a.inPrompt[stream] = true
		if !a.healing {
			a.healing = true
			go s.heal(a)
		}
	case ev.Kind == term.InputStart && *st == streamCapture && a.inPrompt[stream]:
		a.inPrompt[stream] = false
	case ev.Kind == term.Private && ev.Text == "eom":
		if *st == streamWaiting {
			return
		}
		// The line ended: the rc asks next whether the agent's keys are
		// to be discarded; the answer is on its way before it does.
		s.endOfInput(a)
		if ev.Fields["bg"] == "1" || mayBackground(a.rec.Command) {
			s.rotate = true // a job it started may write here later
		}
		if stream == 1 {
			s.endAgent(a, ev, false)
			return
		}
		*st = streamClosed
		s.finishAgent(a)
	}
}

// abortContinuation presses Ctrl-C at the continuation prompt of an
// incomplete agent line, again if the first one came before bash could act
// on it, until the line is abandoned.
func (s *Shell) abortContinuation(a *agentRun) {
	for range 5 {
		if _, err := s.writePTY([]byte{3}); err != nil {
			return
		}
		s.mu.Lock()
		err := s.waitUntil(context.Background(), time.Second, func() bool { return a.phase == phaseDone })
		s.mu.Unlock()
		if !errors.Is(err, errDeadline) {
			return
		}
		s.log.Warn("shell: Ctrl-C at the continuation prompt had no effect yet; pressing it again")
	}
}

// confirmEnds applies the tentative end marks of the current command once
// the shell has drawn its prompt, after a moment in which a later (real)
// end mark still in the relay can replace them; s.mu is held.
func (s *Shell) confirmEnds() {
	a := s.agent
	if a == nil || (a.tentative[0] == nil && a.tentative[1] == nil) {
		return
	}
	time.AfterFunc(confirmDelay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.agent != a {
			return
		}
		for stream, ev := range a.tentative {
			if ev != nil {
				a.tentative[stream] = nil
				s.relayEvent(stream, ev, true)
			}
		}
		s.changed.Broadcast()
	})
}

// confirmDelay is how long a tentative end mark waits, after the prompt,
// for the relay to deliver a later one.
const confirmDelay = 100 * time.Millisecond

// endAgent takes the command's result from the stderr end mark (ev) and
// closes both streams if hooksGone; s.mu is held.
func (s *Shell) endAgent(a *agentRun, ev *term.Event, hooksGone bool) {
	if !hooksGone {
		st, err := strconv.Atoi(ev.Fields["status"])
		a.rec.ExitCode, a.rec.ExitKnown = st, err == nil
		a.rec.Repaired = append(a.rec.Repaired, splitList(ev.Fields["fixed"])...)
		if c, ok := ev.Fields["cwd"]; ok {
			s.cwd = c
		}
		if a.incomplete {
			a.rec.ExitCode, a.rec.ExitKnown = 2, true
			_, _ = a.out[1].Write([]byte("tandem: the command is incomplete: bash asked for a continuation line (an unclosed quote, parenthesis, block or here-document?); nothing ran\n"))
		} else if ev.Fields["ran"] != "1" && a.streams[1] == streamEcho {
			// The line never ran (a syntax error): bash's message is what
			// followed the redraw of the line.
			_, _ = a.out[1].Write([]byte(syntaxMessage(a.echoTail, a.rec.Command)))
		}
	} else {
		a.streams[0] = streamClosed
		s.keysLost(a)
	}
	a.streams[1] = streamClosed
	a.rec.Duration = time.Since(a.rec.Started)
	s.finishAgent(a)
}

// healWait bounds the wait for the shell to answer the heal key.
const healWait = 2 * time.Second

// heal presses the heal key for an agent command whose prompt came back
// without tandem's hook. If the shell does not answer (its line editor is
// off, or a command replaced the shell itself), the command ends with its
// status unknown and the integration counts as lost.
func (s *Shell) heal(a *agentRun) {
	if _, err := s.writePTY([]byte(keyHeal)); err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitUntil(context.Background(), healWait, func() bool { return a.phase == phaseDone }); !errors.Is(err, errDeadline) {
		return
	}
	s.log.Warn("shell: the shell did not answer the heal key; its integration is lost")
	s.lost = "a command removed tandem's PROMPT_COMMAND hook and the shell did not let tandem put it back (is line editing off, set +o emacs?)"
	a.hooks = true
	s.endAgent(a, nil, true)
}

// splitList splits a comma-separated list, "" giving none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// showEarly shows the stdout that arrived before the command line's echo
// had been shown; s.mu is held.
func (s *Shell) showEarly(a *agentRun) {
	if len(a.outEarly) > 0 {
		s.show(a.outEarly)
		a.outEarly = nil
	}
}

// finishAgent completes the agent command once both streams ended; s.mu
// is held.
func (s *Shell) finishAgent(a *agentRun) {
	if a.streams[1] == streamClosed {
		s.showEarly(a)
	}
	if a.streams[0] != streamClosed || a.streams[1] != streamClosed || a.phase == phaseDone {
		return
	}
	a.rec.Cwd = s.cwd
	a.closeOut()
	a.phase = phaseDone
	s.releaseLater(a) // a line that never started: the keys go to the prompt
	if s.agent == a {
		s.agent = nil
		if s.lateInput {
			s.promptDrawn()
		}
		s.maybeFix()
	}
	s.flushHeldOut()
	s.ended(execguard.Agent, a.rec.Started, &a.rec)
	if s.opts.OnCommand != nil {
		s.opts.OnCommand(a.rec)
	}
	s.changed.Broadcast()
}

// bracketedPasteOff is what readline writes when it hands the terminal back
// to run a line (with bracketed paste on, the default since bash 5.1).
var bracketedPasteOff = []byte("\x1b[?2004l\r")

// syntaxMessage extracts bash's message for a line that failed to parse
// from readline's redraw of the line that preceded it.
func syntaxMessage(echo []byte, command string) string {
	if i := bytes.LastIndex(echo, bracketedPasteOff); i >= 0 {
		echo = echo[i+len(bracketedPasteOff):]
	} else {
		// No bracketed paste: skip the echoed line, one newline per line.
		for range bytes.Count([]byte(command), []byte("\n")) + 1 {
			i := bytes.IndexByte(echo, '\n')
			if i < 0 {
				break
			}
			echo = echo[i+1:]
		}
	}
	return string(bytes.ReplaceAll([]byte(term.StripString(string(echo))), []byte("\r"), nil))
}

// appendBounded appends p to b, keeping only the last max bytes.
func appendBounded(b, p []byte, max int) []byte {
	b = append(b, p...)
	if len(b) > max {
		b = append(b[:0], b[len(b)-max:]...)
	}
	return b
}

// relayScanner splits one relay stream into output bytes and the trusted
// marks that integration.bash writes into it: begin and end of an agent
// command, and the prompt and command-start marks that bash prints to
// stderr while it is captured. A mark is trusted when it ends in the
// session nonce; every other byte, including forged or partial marks, is
// output and passes through exactly.
type relayScanner struct {
	suffix  []byte // ";n=" + nonce
	decode  *term.Parser
	pending []byte
}

// maxRelayMark bounds a mark's payload; a longer candidate is output.
const maxRelayMark = 64 << 10

func newRelayScanner(nonce string) *relayScanner {
	return &relayScanner{suffix: []byte(";n=" + nonce), decode: term.NewParser(nonce)}
}

var (
	intro133 = []byte("\x1b]133;")
	intro633 = []byte("\x1b]633;")
)

// feed splits b into output and marks, in order. Bytes that may start a
// mark are held back until a later call decides.
func (f *relayScanner) feed(b []byte, emit func(data []byte, ev *term.Event)) {
	f.pending = append(f.pending, b...)
	p := f.pending
	for len(p) > 0 {
		i := bytes.IndexByte(p, 0x1b)
		if i < 0 {
			emit(p, nil)
			p = nil
			break
		}
		if i > 0 {
			emit(p[:i], nil)
			p = p[i:]
		}
		n, mark, hold := f.mark(p)
		if hold {
			break
		}
		if mark {
			f.decode.Feed(p[:n], func(it term.Item) {
				if it.Event != nil {
					emit(nil, it.Event)
				}
			})
		} else {
			emit(p[:n], nil)
		}
		p = p[n:]
	}
	f.pending = append(f.pending[:0], p...)
}

// mark looks at p, which starts with ESC: it returns the length of a
// trusted mark (mark true) or of output bytes, or hold when more input is
// needed to decide.
func (f *relayScanner) mark(p []byte) (n int, mark, hold bool) {
	if len(p) < len(intro133) {
		if bytes.HasPrefix(intro133, p) || bytes.HasPrefix(intro633, p) {
			return 0, false, true
		}
		return 1, false, false
	}
	if !bytes.HasPrefix(p, intro133) && !bytes.HasPrefix(p, intro633) {
		return 1, false, false
	}
	body := p[len(intro133):]
	j := bytes.IndexAny(body, "\x07\x1b")
	switch {
	case j < 0 && len(body) > maxRelayMark:
		return len(intro133), false, false
	case j < 0:
		return 0, false, true
	case body[j] == 0x1b:
		return len(intro133) + j, false, false
	}
	n = len(intro133) + j + 1
	return n, bytes.HasSuffix(body[:j], f.suffix), false
}

// markerPrefixLen is the length of the longest suffix of b that is a proper
// prefix of one of the markers.
func markerPrefixLen(b []byte, markers ...[]byte) int {
	best := 0
	for _, m := range markers {
		for n := min(len(b), len(m)-1); n > best; n-- {
			if bytes.HasSuffix(b, m[:n]) {
				best = n
				break
			}
		}
	}
	return best
}

// toCRLF converts bare LF to CR LF, as a terminal's onlcr would, so relay
// output (which never passed through the tty) displays right for viewers.
func toCRLF(dst, src []byte) []byte {
	n := bytes.Count(src, []byte{'\n'})
	if n == 0 {
		return append(dst, src...)
	}
	// One pass over a buffer of the final size: output such as seq's is
	// mostly newlines, where copying line by line costs twice as much.
	base := len(dst)
	dst = slices.Grow(dst, len(src)+n)[:base+len(src)+n]
	out := dst[base:]
	j := 0
	prev := byte(0) // a newline at the start of src gets its CR
	for _, c := range src {
		if c == '\n' && prev != '\r' {
			out[j] = '\r'
			j++
		}
		out[j] = c
		j++
		prev = c
	}
	return dst[:base+j]
}
