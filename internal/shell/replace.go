package shell

import (
	"fmt"
	"regexp"
	"time"
)

// A command that replaces the shell (exec bash, exec zsh -l) takes
// tandem's integration with it: the new program prints no marks, so the
// command that ran exec never ends, and without a watch every agent call
// would be busy for the lifetime of the new shell. tandem does not try to
// reinstall its integration in the new shell: that means typing a line of
// its own into a shell the human is typing into (visible, in their
// history, racing their keys), and handing a fresh nonce over the
// terminal to a process tandem did not start, where any program the new
// shell runs could ask for it first and fake a reinstalled integration;
// and it could never work for zsh, su or ssh. Instead, the moment tandem
// sees the shell's process run another program, it ends the running
// command (status unknown) and answers every later call
// shell_integration_lost, saying what replaced the shell.

// ShellProgramNamer is implemented by a Conn that can name the program
// the shell's process runs (/proc/PID/comm): after an exec, what replaced
// bash, for the agent's message.
type ShellProgramNamer interface {
	ShellProgram(shellPID int) (string, error)
}

// LocalProcesses is implemented by a Conn whose look at the shell's
// process costs no round trip (a local PTY). tandem then watches every
// running command for an exec of the shell; over SSH, where each look is
// an exec channel, only commands whose line names exec are watched, and
// any other is looked at when an agent call finds it running.
type LocalProcesses interface {
	LocalProcesses() bool
}

// How often a running command is looked at for an exec of the shell:
// locally (a /proc read), and over SSH (an exec channel).
const (
	replacePollLocal = 100 * time.Millisecond
	replacePollSSH   = 300 * time.Millisecond
)

// execWord finds the exec builtin in a command line: a word of its own.
var execWord = regexp.MustCompile(`(^|[^[:alnum:]_.-])exec($|[[:space:];&|)])`)

// watchReplace looks at the shell's process while a command runs, for as
// long as the shell lives and its integration is not lost.
func (s *Shell) watchReplace() {
	rr, ok := s.conn.(ReplaceReporter)
	if !ok {
		return
	}
	lp, ok := s.conn.(LocalProcesses)
	local := ok && lp.LocalProcesses()
	every := replacePollSSH
	if local {
		every = replacePollLocal
	}
	for {
		s.mu.Lock()
		for s.err == nil && s.lost == "" && !s.replaceDue(local) {
			s.changed.Wait()
		}
		if s.err != nil || s.lost != "" {
			s.mu.Unlock()
			return
		}
		pid := s.pid
		s.mu.Unlock()
		select {
		case <-s.conn.Done():
			return
		case <-time.After(every):
		}
		s.mu.Lock()
		due := s.replaceDue(local)
		s.mu.Unlock()
		if !due {
			continue
		}
		if r, err := rr.ShellReplaced(pid); err == nil && r {
			s.noteReplaced(pid)
		}
	}
}

// replaceDue reports whether a running command is to be looked at: any
// command where looking is cheap, else one whose line names exec; s.mu is
// held.
func (s *Shell) replaceDue(local bool) bool {
	var line string
	switch {
	case s.human != nil && !s.human.ended:
		line = s.human.rec.Command
	case s.agent != nil && s.agent.phase == phaseAccepted:
		line = s.agent.rec.Command
	default:
		return false
	}
	return local || execWord.MatchString(line)
}

// replacedNow looks, once, whether the shell's process was replaced while
// a command runs (an agent call found it running); if so the integration
// is lost. s.mu is held, and let go during the look.
func (s *Shell) replacedNow() bool {
	rr, ok := s.conn.(ReplaceReporter)
	running := s.human != nil || (s.agent != nil && s.agent.phase == phaseAccepted)
	if !ok || !running || s.pid == 0 {
		return false
	}
	pid := s.pid
	s.mu.Unlock()
	r, err := rr.ShellReplaced(pid)
	if err == nil && r {
		s.noteReplaced(pid)
	}
	s.mu.Lock()
	return s.lost != ""
}

// noteReplaced marks the integration lost because the shell's process
// now runs another program, and ends the command that ran exec: the
// human's (reported, status unknown) or the agent's (its Exec answers
// shell_integration_lost).
func (s *Shell) noteReplaced(pid int) {
	what := "another program"
	if n, ok := s.conn.(ShellProgramNamer); ok {
		if p, err := n.ShellProgram(pid); err == nil && p != "" {
			what = p
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != "" || s.err != nil {
		return
	}
	switch h, a := s.human, s.agent; {
	case h != nil && !h.ended:
		s.lost = fmt.Sprintf("the human's command `%s` replaced the session's shell (pid %d) with %s, which does not run tandem's integration: tandem ended that command (status unknown) and can neither run your commands in the new shell nor report the human's there one by one. The human keeps the terminal; when they leave the new shell (exit), the session ends", lastBytes(s.redactText(h.rec.Command), 200), pid, what)
		h.ended = true
		h.rec.Duration = time.Since(h.rec.Started)
		s.fresh = true
		s.finishHuman()
	case a != nil && a.phase == phaseAccepted:
		s.lost = fmt.Sprintf("your command replaced the session's shell (pid %d) with %s (exec), which does not run tandem's integration, so its exit code is unknown and later commands cannot be captured", pid, what)
		a.hooks = true
		s.endAgent(a, nil, true)
	default:
		s.lost = fmt.Sprintf("a command replaced the session's shell (pid %d) with %s (exec), which does not run tandem's integration", pid, what)
	}
	s.log.Warn("shell: the shell's process was replaced; its integration is lost", "pid", pid, "program", what)
	s.changed.Broadcast()
}
