package shell

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// MaxExecRecords bounds Record.Execs and Record.Blocked; past it only
// Record.ExecsOmitted counts.
const MaxExecRecords = 1000

// ExecInfo is one program the shell's process tree is about to start, and
// what the shell was doing when it was started.
type ExecInfo struct {
	execguard.Exec
	// Human says the process is a person's: it descends from a command a
	// person started (the shell forked its ancestor while it ran their
	// command and no agent's; see execguard.Ledger). A process tandem
	// cannot place so is not.
	Human bool
	// Source is "agent" while an agent command runs (from staging to its
	// end), "user" while a human's runs, "" otherwise: what the shell was
	// doing, not who started the process (Human).
	Source string
	// CommandID and Command name the running command, if any.
	CommandID string
	Command   string
	// ShellCwd is the shell's working directory as last reported
	// (Exec.Cwd is the process's own).
	ShellCwd string
	// Hold, for an agent command's exec, tells the waiting Exec call that
	// the program waits for a human (id names the approval): the call
	// returns after ExecOptions.HoldWait while the command keeps running,
	// or after wait if that is shorter (a client answers the approval in
	// the call's reply). The judge calls the returned release once the
	// wait is over. Nil outside agent commands.
	Hold func(id string, wait time.Duration) (release func())
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
	// ExitCode is the program's exit status, or Signal names the signal
	// that ended it, where the backend sees processes end (see ExitSyncer)
	// and the program ended before its command did. Both are absent for a
	// program still running then, one that exec'd another (the process's
	// status is the last program's), a refused one, or where the backend
	// cannot tell: never made up.
	ExitCode *int   `json:"exitCode,omitempty"`
	Signal   string `json:"signal,omitempty"`
	// exit receives the status from the backend while the command runs.
	exit *atomic.Pointer[ExitStatus]
}

// ExitStatus is how a program's process ended.
type ExitStatus struct {
	// Code is the exit status; meaningful when Signal is empty.
	Code int
	// Signal names the signal that killed it (SIGKILL), if one did.
	Signal string
}

// ExitSyncer is implemented by a Conn that reports how the programs it
// let start ended (LaunchJudge's exited): SyncExits delivers every end
// the kernel has reported so far, before a command's record is final. It
// must not call the Shell.
type ExitSyncer interface {
	SyncExits()
}

// LaunchJudge is what a backend calls for every exec of the shell's tree
// (see Launch.JudgeExec); o is where the process comes from
// (execguard.Trace). For an exec it allows, it may return exited, which
// the backend calls at most once with how the program ended, if it can
// tell; exited does not block or call the backend.
type LaunchJudge func(ctx context.Context, e execguard.Exec, o execguard.Origin) (v execguard.Verdict, exited func(ExitStatus))

// lineStartWait bounds how long a foreground program waits for the
// terminal reader to see the start of the line a viewer submitted.
const lineStartWait = 2 * time.Second

// judgeExec is the Shell's LaunchJudge: it allows the shell's own start-up
// (the launcher's exec of sh, sh's of bash, the integration's stty and
// mkfifo, the user's rc) unjudged, then asks opts.JudgeExec with the
// running command named and whether a person started the process, and
// files the answer in its record.
func (s *Shell) judgeExec(ctx context.Context, e execguard.Exec, o execguard.Origin) (execguard.Verdict, func(ExitStatus)) {
	s.mu.Lock()
	if !s.ready {
		s.mu.Unlock()
		return execguard.Allow, nil
	}
	if s.agent == nil && s.human == nil && s.forkedSinceEnter(o) {
		// A line a viewer submitted starts a program before the terminal
		// reader has seen its start mark (a loaded machine): the program
		// waits in the kernel until the reader names its command, or the
		// line turns out to have gone elsewhere.
		_ = s.waitUntil(ctx, lineStartWait, func() bool {
			return s.agent != nil || s.human != nil || (len(s.credits) == 0 && len(s.typed) == 0)
		})
	}
	x := ExecInfo{Exec: e, Human: s.ledger.Human(o, s.running()...)}
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
		if x.Source == "user" {
			x.Command = s.redactText(x.Command)
		}
	}
	if x.Source == "agent" && !x.Human {
		// A person's process (their job in the background) is filed with
		// the agent's command it ran during, but holds up no agent call.
		x.Hold = func(id string, wait time.Duration) func() { return s.hold(a, id, wait) }
	}
	x.ShellCwd = s.cwd
	s.mu.Unlock()

	r := s.opts.JudgeExec(ctx, x)

	var exited func(ExitStatus)
	s.mu.Lock()
	if rec != nil && ((a != nil && s.agent == a) || (a == nil && s.human == h)) {
		er := ExecRecord{Argv: s.redactArgs(e.Argv), Truncated: e.Truncated, Path: e.Path, Cwd: e.Cwd, Decision: r.Decision, Rule: r.Rule}
		if r.Allow {
			box := new(atomic.Pointer[ExitStatus])
			er.exit, exited = box, func(st ExitStatus) { box.Store(&st) }
		}
		rec.addExec(er, !r.Allow)
	}
	s.mu.Unlock()
	if r.Allow {
		return execguard.Allow, exited
	}
	return execguard.Deny, nil
}

// hold marks a's command as waiting for a human about one of its
// programs, and wakes its Exec once HoldWait (or the shorter wait) has
// passed; release clears the mark.
func (s *Shell) hold(a *agentRun, id string, wait time.Duration) (release func()) {
	s.mu.Lock()
	a.held, a.heldAt, a.heldWait = id, time.Now(), a.holdWait
	if wait > 0 && a.holdWait > 0 {
		a.heldWait = min(wait, a.holdWait)
	}
	var t *time.Timer
	if a.heldWait > 0 {
		t = time.AfterFunc(a.heldWait, s.wake)
	}
	s.changed.Broadcast()
	s.mu.Unlock()
	return func() {
		if t != nil {
			t.Stop()
		}
		s.mu.Lock()
		if a.held == id {
			a.held, a.heldAt = "", time.Time{}
		}
		s.changed.Broadcast()
		s.mu.Unlock()
	}
}

// HoldAgent marks the agent's running command as held for a human's
// decision id, as ExecInfo.Hold does for a program it started: for a
// connection one of its programs waits on (the egress proxy's ask). The
// Exec waiting for the command then returns after HoldWait (or wait, if
// shorter), naming id. ok is false when no agent command runs.
func (s *Shell) HoldAgent(id string, wait time.Duration) (release func(), ok bool) {
	s.mu.Lock()
	a := s.agent
	running := a != nil && a.started && a.phase != phaseDone
	s.mu.Unlock()
	if !running {
		return nil, false
	}
	return s.hold(a, id, wait), true
}

// AwaitHeld goes on waiting for the agent's command id, which an Exec left
// running because one of its programs waited for a human, as that Exec
// would have: until the command ends, until a program of it has waited
// HoldWait on a decision other than skip (one just made, whose hold is
// about to be released), or until d. running is false once the command
// ended (or when it is not the agent's running command: it ended before);
// held names what it waits for, if that is why it returned.
func (s *Shell) AwaitHeld(ctx context.Context, id string, d time.Duration, skip string) (held string, running bool, err error) {
	s.mu.Lock()
	a := s.agent
	ours := func() bool { return s.agent == a && a.phase != phaseDone }
	if a == nil || a.rec.ID != id || !ours() {
		s.mu.Unlock()
		return "", false, nil
	}
	stop := func() bool { return a.holdExpired() && a.held != skip }
	// As Exec, it answers once the command waits for input (settle.go).
	defer s.watchSettle(a)()
	err = s.waitUntil(ctx, d, func() bool {
		_, settled := s.settledLocked(a)
		return !ours() || stop() || settled
	})
	running = ours()
	if running && stop() {
		held, err = a.held, nil
	}
	s.mu.Unlock()
	switch {
	case !running || held != "" || errors.Is(err, errDeadline):
		return held, running, nil
	case err != nil && ctx.Err() != nil:
		// As for Exec: the caller is gone, and its command is not left
		// running unseen.
		ictx, cancel := context.WithTimeout(context.Background(), 4*DefaultCancelGrace)
		defer cancel()
		_, _ = s.Cancel(ictx, 0)
		return "", false, fmt.Errorf("exec: interrupted: %w", ctx.Err())
	}
	return "", running, err
}

// holdExpired reports whether a program of the command has waited for a
// human longer than the Exec call waits; s.mu is held.
func (a *agentRun) holdExpired() bool {
	return a.heldWait > 0 && a.held != "" && time.Since(a.heldAt) >= a.heldWait
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
