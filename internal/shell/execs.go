package shell

import (
	"context"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// MaxExecRecords bounds Record.Execs and Record.Blocked; past it only
// Record.ExecsOmitted counts.
const MaxExecRecords = 1000

// ExecInfo is one program the shell's process tree is about to start, and
// what the shell was doing when it was started.
type ExecInfo struct {
	execguard.Exec
	// Foreground says the process is in the terminal's foreground process
	// group: the job a person at the terminal is running.
	Foreground bool
	// Source is "agent" while an agent command runs (from staging to its
	// end), "user" while a human's runs, "" otherwise (a background job
	// after its command ended, or nothing at all).
	Source string
	// CommandID and Command name the running command, if any.
	CommandID string
	Command   string
	// Cwd is the shell's working directory when the command started
	// (Exec.Cwd is the process's own).
	ShellCwd string
}

// ExecRuling is a judge's answer for one exec.
type ExecRuling struct {
	// Allow lets the exec continue; otherwise it fails with EPERM.
	Allow bool
	// Decision is what is recorded: "allow", "deny", "approved", "denied"
	// or "human" (a person's own command, not judged).
	Decision string
	// Rule is the rule that decided, as the operator wrote it; empty when
	// no rule matched.
	Rule string
}

// ExecJudge decides one exec. It may block (an approval waits for a
// human; the process waits in the kernel meanwhile), and it runs without
// the Shell's lock: it may read the Shell, not wait for it to change.
type ExecJudge func(ctx context.Context, x ExecInfo) ExecRuling

// ExecRecord is one program a command started, as recorded with it.
type ExecRecord struct {
	Argv      []string `json:"argv"`
	Truncated bool     `json:"truncated,omitempty"`
	Path      string   `json:"path"`
	Cwd       string   `json:"cwd"`
	Decision  string   `json:"decision"`
	Rule      string   `json:"rule,omitempty"`
}

// LaunchJudge is what a backend calls for every exec of the shell's tree
// (see Launch.JudgeExec). foreground is as in ExecInfo.
type LaunchJudge func(ctx context.Context, e execguard.Exec, foreground bool) execguard.Verdict

// judgeExec is the Shell's LaunchJudge: it allows the shell's own start-up
// (the launcher's exec of sh, sh's of bash, the integration's stty and
// mkfifo, the user's rc) unjudged, then asks opts.JudgeExec with the
// running command named and files the answer in its record.
func (s *Shell) judgeExec(ctx context.Context, e execguard.Exec, foreground bool) execguard.Verdict {
	s.mu.Lock()
	if !s.ready {
		s.mu.Unlock()
		return execguard.Allow
	}
	x := ExecInfo{Exec: e, Foreground: foreground}
	var rec *Record
	a, h := s.agent, s.human
	switch {
	case a != nil && a.phase != phaseDone:
		x.Source, rec = "agent", &a.rec
	case h != nil && !h.ended:
		x.Source, rec = "user", &h.rec
	}
	if rec != nil {
		x.CommandID, x.Command = rec.ID, rec.Command
	}
	x.ShellCwd = s.cwd
	s.mu.Unlock()

	r := s.opts.JudgeExec(ctx, x)

	s.mu.Lock()
	if rec != nil && ((a != nil && s.agent == a) || (a == nil && s.human == h)) {
		rec.addExec(ExecRecord{Argv: e.Argv, Truncated: e.Truncated, Path: e.Path, Cwd: e.Cwd, Decision: r.Decision, Rule: r.Rule}, !r.Allow)
	}
	s.mu.Unlock()
	if r.Allow {
		return execguard.Allow
	}
	return execguard.Deny
}

// addExec files one exec, within MaxExecRecords.
func (r *Record) addExec(e ExecRecord, blocked bool) {
	if len(r.Execs) < MaxExecRecords {
		r.Execs = append(r.Execs, e)
	} else {
		r.ExecsOmitted++
	}
	if blocked && len(r.Blocked) < MaxExecRecords {
		r.Blocked = append(r.Blocked, e)
	}
}
