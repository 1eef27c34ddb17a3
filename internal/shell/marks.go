package shell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/term"
)

// item handles one parsed piece of terminal output; s.mu is held.
func (s *Shell) item(it term.Item) {
	if it.Event == nil {
		if !s.ready {
			s.noteStart(it.Data)
		}
		if h := s.human; h != nil {
			if !h.prompted {
				_, _ = h.plain.Write(it.Data)
			}
		} else if a := s.agent; a != nil && a.started && a.phase == phaseAccepted {
			// The agent's command writing to the terminal itself (/dev/tty,
			// a getpass prompt): its last line is what it waits at.
			a.lastOut = appendBounded(a.lastOut, it.Data, maxLastLine*4)
		}
		s.display(s.hideDrainEcho(it.Data))
		return
	}
	s.event(it.Event)
	s.changed.Broadcast()
}

// event advances the terminal side of the state machine; s.mu is held.
// The agent's command is driven by the relay (relayEvent): a mark on the
// terminal can only start or end a human command, and only when a viewer
// typed something that could have started one.
func (s *Shell) event(e *term.Event) {
	switch e.Kind {
	case term.Private:
		s.private(e)
	case term.InputStart:
		s.confirmEnds()
		if s.fresh {
			s.typed = nil // a new command line starts
		}
		switch {
		case s.fresh:
			s.promptDrawn()
		case s.promptDue && s.agent != nil && s.human == nil:
			// The agent's prompt came before its end was read from the
			// relay: the prompt is idle once the command is final.
			s.lateInput = true
		}
	case term.CommandStart:
		s.promptUp = false
		if s.fixing {
			return // tandem's own repair line
		}
		if s.human != nil {
			// The next line of a multi-line buffer (a bracketed paste): it
			// runs as part of the open command, under its one end mark.
			s.lastUse = time.Now()
			return
		}
		// The Enter that submitted the line was taken when readline
		// accepted it (the line mark); without line marks (Enter rebound),
		// take one now.
		c, ok := s.typedBy, s.typedOK
		if len(s.typed) == 0 {
			c, ok = s.useCredit()
		}
		if !ok && (s.agent != nil || s.promptDue) {
			// While the agent's line is captured, bash prints PS0 into the
			// relay: a C on the terminal without a viewer's Enter is a
			// program of the agent's printing marks. So is one read after
			// the relay ended the command but before its prompt: the
			// terminal is read apart from the relay, and may lag it.
			s.log.Warn("shell: ignored a command-start mark that no viewer input explains (a program printing marks?)")
			return
		}
		if !ok {
			s.log.Warn("shell: a command started that no viewer input explains; it is reported as unattributed")
		}
		if a := s.agent; a != nil && a.phase <= phaseStaging {
			a.preempt = true // the human's type-ahead ran first
		}
		s.human = s.newHumanRun(c.viewer, !ok)
		if ok {
			s.human.entered = c.at // its programs are the person's (owners.go)
		}
		// Named now by the lines readline accepted; E names it at the end.
		s.human.rec.Command = strings.TrimRight(strings.Join(s.typed, "\n"), "\n")
		s.typed = nil
		if s.opts.OnStart != nil {
			s.opts.OnStart(s.humanRecord(s.human))
		}
	case term.CommandLine:
		if h := s.human; h != nil && e.Text != "" {
			// A here-document's entry ends in a newline of its own.
			text := strings.TrimRight(e.Text, "\n")
			h.rec.Command = text
			if n := len(h.lines); n > 1 && strings.TrimRight(h.lines[n-1], "\n") == text {
				h.rec.Command = strings.Join(h.lines, "\n")
			}
		}
	case term.CommandEnd:
		if h := s.human; h != nil {
			// For a local shell, an end mark printed while a program holds
			// the terminal is forged, unless the human typed since the command
			// began (their next command may already be in the foreground).
			// Nor when lines typed ahead are waiting: the next of them
			// may already hold the terminal.
			if !s.fgShell && !s.inputAt.After(h.rec.Started) && len(s.credits) == 0 {
				s.log.Warn("shell: ignored an end mark printed while a program held the terminal")
				return
			}
			h.rec.ExitCode, h.rec.ExitKnown = e.Exit, e.HasExit
			h.rec.Duration = time.Since(h.rec.Started)
			h.ended = true
		} else if a := s.agent; a != nil && a.phase == phaseAccepted {
			// The agent's line ended; its output may still be in the relay.
			// Hold the prompt back so viewers see the output first.
			s.holdOut = true
		}
	case term.Cwd:
		if s.agent == nil || s.agent.phase != phaseAccepted {
			s.cwd = e.Text
		}
		s.fresh = true
		if s.fixing {
			s.fixing, s.fixLine = false, ""
		}
		s.finishHuman()
	case term.PromptStart:
		if s.promptDue && s.agent == nil && s.human == nil {
			// The prompt after an agent command (even if the user's hooks
			// are gone and no P mark came).
			s.fresh = true
		}
		// A prompt while a human command is still open means a command
		// removed tandem's PROMPT_COMMAND hook: the command ended. The heal
		// key ends it as the hook would (its line, its status) and puts
		// the hook back; if the shell does not answer, its status is
		// unknown.
		if h := s.human; h != nil && !s.fresh && s.fgShell {
			// What follows is the prompt, not the command's output.
			h.prompted = true
		}
		if h := s.human; h != nil && !s.fresh && !h.healing && s.fgShell {
			h.healing = true
			go s.healHuman(h)
		}
	}
}

// maybeFix types the pending repair line at an idle prompt, which bash
// draws itself (line editing is off); not while an agent line is still
// being finished, nor while lines typed ahead are to run first; s.mu is
// held.
func (s *Shell) maybeFix() {
	// Not over a line a viewer has begun to type at this prompt either:
	// without line editing, keys land in one buffer.
	if s.fixLine == "" || s.fixing || !s.promptUp || s.agent != nil || s.human != nil || len(s.credits) > 0 || s.inputAt.After(s.lastUse) {
		return
	}
	s.fixing = true
	line := s.fixLine
	go func() { _, _ = s.writePTY([]byte(line + "\r")) }()
}

// healHuman presses the heal key for a human command whose prompt came
// back without tandem's hook, and ends the command without a status if
// the shell does not answer.
func (s *Shell) healHuman(h *humanRun) {
	s.mu.Lock()
	staging := s.agent != nil
	s.mu.Unlock()
	if !staging {
		_, _ = s.writePTY([]byte(keyHeal))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitUntil(context.Background(), healWait, func() bool { return s.human != h }); !errors.Is(err, errDeadline) {
		return
	}
	h.ended = true
	h.rec.Duration = time.Since(h.rec.Started)
	s.fresh = true
	s.finishHuman()
	s.changed.Broadcast()
}

// promptDrawn records an idle prompt: the input line after a prompt that
// follows a finished command; s.mu is held.
func (s *Shell) promptDrawn() {
	s.fresh, s.promptUp, s.cont, s.promptDue, s.lateInput = false, true, false, false, false
	s.lastUse = time.Now()
	s.promptWithoutDrain()
	s.maybeFix()
	if s.relay != nil {
		s.ready = true
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
	case "want":
		s.dropReadCredits()
		s.want()
	case "drain":
		// The agent's command ended; the shell waits for the answer before
		// it reads its next line (agentkeys.go).
		s.drainMark(e.Fields["id"])
	case "drained":
		s.drainedMark()
	case "staged", "busy", "stagefail":
		if e.Text == "staged" {
			// The FIFOs the shell now writes agent lines to.
			if p, err := strconv.Atoi(e.Fields["pair"]); err == nil {
				s.switchPair(p)
			}
		}
		a := s.agent
		if a != nil && a.phase == phaseStaging && a.reply == "" && (e.Text == "stagefail" || e.Fields["id"] == a.rec.ID) {
			a.reply, a.busyLine = e.Text, e.Fields["line"]
		} else if e.Text == "staged" {
			// A line tandem stopped waiting for: it must never run.
			go func() { _, _ = s.writePTY([]byte(keyUnstage)) }()
		}
	case "healed":
		// What a command broke of the integration and the shell put back:
		// said after the command's end mark, before its P mark.
		if h := s.human; h != nil {
			h.rec.Repaired = append(h.rec.Repaired, splitList(e.Fields["what"])...)
		}
	case "noedit":
		// Line editing is off (set +o emacs): tandem types the command
		// that turns it back on at the prompt bash draws itself.
		if m := e.Fields["mode"]; m == "emacs" || m == "vi" {
			s.fixLine = "set -o " + m
		}
	case "exit":
		// The shell's exit hook: no agent line was running, so the human
		// ended it (exit, Ctrl-D).
		s.exitMark = true
	case "line":
		// A line readline accepted at a prompt, on a viewer's Enter: the
		// command about to run, or one line of it if it continues, or an
		// empty line that runs nothing. bash is at its prompt, so an agent
		// command still open here is only waiting for its end to be read.
		if s.human == nil {
			s.promptUp = false // the line left the prompt; the next prompt says when it is done
			c, ok := s.useCredit()
			if len(s.typed) == 0 {
				s.typedBy, s.typedOK = c, ok
			}
			s.typed = append(s.typed, e.Fields["text"])
		}
	case "hist":
		// The lines of a multi-line buffer, sent just before its E mark.
		if s.human != nil {
			s.human.lines = historyLines(e.Fields["text"])
		}
	case "ps2":
		// A continuation line: the command line goes on.
		s.cont = true
		s.promptUp = false
	}
}

// finishHuman completes the open human command once its end is in; s.mu
// is held.
func (s *Shell) finishHuman() {
	h := s.human
	if h == nil || !h.ended {
		return
	}
	s.human = nil
	h.rec.Cwd = s.cwd
	_ = h.plain.Flush()
	h.rec.Redacted.Stdout = h.out.end()
	_ = h.rec.Stdout.Close()
	s.ended(execguard.Human, h.entered, &h.rec)
	if s.opts.OnCommand != nil {
		// A secret file the command wrote hides its value in the
		// command's line too (its output was redacted as it came).
		s.refreshRedact()
		s.opts.OnCommand(s.humanRecord(h))
	}
}

// humanRecord is h's record as the session files it, with the secrets in
// its command line redacted (a token typed into an export); s.mu is held.
func (s *Shell) humanRecord(h *humanRun) Record {
	r := h.rec
	r.Command = s.redactText(r.Command)
	if r.Redacted.Stdout == 0 {
		r.Redacted.Stdout = h.out.count()
	}
	return r
}

type humanRun struct {
	rec     Record
	plain   *term.Plain // strips ANSI into out as output arrives
	out     *outStream  // redacts into rec.Stdout
	ended   bool
	healing bool     // the heal key was pressed for it
	lines   []string // the history entries of a multi-line buffer

	// entered is when the viewer's Enter that submitted it came; zero if
	// none did (owners.go).
	entered time.Time

	// prompted is set when bash drew its prompt before the command's end
	// mark (the hook was gone): later bytes are the prompt's.
	prompted bool
}

// historyLines splits the output of bash's history builtin, run with
// HISTTIMEFORMAT set to an RS byte, into its entries: each starts with its
// number, an optional '*', a space and the RS. An entry may span lines (a
// here-document).
func historyLines(out string) []string {
	out = strings.TrimSuffix(out, "\n")
	var lines []string
	for out != "" {
		i := strings.IndexByte(out, '\x1e')
		if i < 0 {
			break
		}
		out = out[i+1:]
		j := nextHistoryEntry(out)
		lines = append(lines, strings.TrimRight(out[:j], "\n"))
		out = out[j:]
		out = strings.TrimPrefix(out, "\n")
	}
	return lines
}

// nextHistoryEntry is the index of the newline that ends the entry at the
// start of s: the first newline followed by a history number and an RS.
func nextHistoryEntry(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] != '\n' {
			continue
		}
		j := i + 1
		for j < len(s) && s[j] == ' ' {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j && k < len(s) && (s[k] == ' ' || s[k] == '*') {
			k++
			for k < len(s) && s[k] == ' ' {
				k++
			}
			if k < len(s) && s[k] == 0x1e {
				return i
			}
		}
	}
	return len(s)
}

func (s *Shell) newHumanRun(viewer string, unattributed bool) *humanRun {
	id := newCommandID()
	f := s.opts.Spool.New(id + ".out")
	s.refreshRedact()
	out := s.newOut(f, id+".out")
	return &humanRun{
		rec: Record{ID: id, Source: "user", Started: time.Now(), Merged: true, Stdout: f,
			Viewer: viewer, Unattributed: unattributed},
		plain: term.NewPlain(out),
		out:   out,
	}
}

// newCommandID names a command uniquely, across sessions and restarts.
func newCommandID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "cmd_" + hex.EncodeToString(b[:])
}
