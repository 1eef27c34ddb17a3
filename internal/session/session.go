// Package session owns tandem's live sessions: the registry keyed by
// (tenant, name), ownership by the caller that created a session, session
// tokens (random, stored only as hashes, compared in constant time), the
// user-activity gate, and leases (idle timeout, maximum lifetime). It drives
// shells through package shell and does not know whether a shell is SSH or
// local, nor anything of MCP.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/redact"
	"github.com/tandem-sh/tandem/internal/seal"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/spool"
)

// Caller identifies who makes a call and owns what it creates. Over stdio
// it is the connection; in HTTP mode it is (tenant, actor, agent run) from
// a verified claim. Two callers are the same owner only if every field is
// equal.
type Caller struct {
	Tenant string
	// Actor is the claim's subject; empty over stdio.
	Actor string
	// ID is the connection (stdio) or the claim's sid (HTTP).
	ID string
}

// Target is a resolved place to run a shell.
type Target struct {
	// Name is the configured target name, or "" for ad-hoc SSH parameters.
	Name     string
	Kind     string // "ssh" or "local"
	Host     string
	Port     int
	Username string
	Dialer   shell.Dialer
	// Sandbox describes what confines a sandboxed local shell; nil otherwise.
	Sandbox any
	// Workspace is a local target's read-write directory.
	Workspace string
	// Scope is the claim's workspace name the target was resolved in
	// (HTTP mode); empty over stdio.
	Scope string
	// JudgeExec, if set, decides every program the session's shell starts
	// where the backend can judge execs (shell.Options.JudgeExec); s is
	// the session being judged.
	JudgeExec func(ctx context.Context, s *Session, x shell.ExecInfo) shell.ExecRuling
	// Egress, for a local target with a network allowlist, is served by
	// tandem's egress proxy; nil: none.
	Egress *Egress
	// Redact replaces secrets in what the agent reads of the session (see
	// shell.Options.Redact); nil: nothing is redacted.
	Redact *redact.Redactor
	// RedactViewers redacts what viewers and the recording see as well.
	RedactViewers bool
	// RedactHeld, if set, knows only the secrets tandem holds for the
	// session and adds on its behalf (a credential its egress proxy puts
	// in a request): they are redacted from what viewers, the page, the
	// recording and the audit see, whatever RedactViewers says, so that an
	// echo from a server reaches no human's screen and no record.
	RedactHeld *redact.Redactor
	// RawKey, if set, is the operator's public key the exact bytes of
	// redacted streams are sealed to, beside their spool files.
	RawKey *seal.Key
}

// ViewRedact is what redacts what viewers, the page and the recording
// see: Redact when the target hides every secret from viewers, else
// RedactHeld; nil when they see the exact bytes.
func (t Target) ViewRedact() *redact.Redactor {
	if t.Redact != nil && t.RedactViewers {
		return t.Redact
	}
	return t.RedactHeld
}

// Status values reported for sessions.
const (
	StatusActive = "active"
	StatusEnded  = "ended"
)

// Reasons a session ended.
const (
	EndDisconnected   = "disconnected"
	EndIdleTimeout    = "idle_timeout"
	EndMaxLifetime    = "max_lifetime"
	EndConnectionLost = "connection_lost"
	EndShellExited    = "shell_exited"
	EndServerShutdown = "server_shutdown"
	// EndHumanExit: a human ended the shell (exit, Ctrl-D).
	EndHumanExit = "human_exit"
)

// Session is one named shell owned by one caller.
type Session struct {
	ID        string
	Name      string
	Target    Target
	CreatedAt time.Time

	caller     Caller
	tokenHash  [32]byte
	monitorKey string
	sh         *shell.Shell

	rec     *recording.Writer
	recPath string
	spool   *spool.Dir // where outputs tandem writes itself go

	mu           sync.Mutex
	lastActivity time.Time
	pending      []shell.Record
	endReason    string
	endedAt      time.Time
	lastCommand  string
	hist         history // the commands read back by ID (history.go)
	keptBytes    int64   // the bound on hist's bytes on disk

	// The agent's request for the human (see handback.go): requestCh is
	// closed and replaced when it changes.
	request     *HumanRequest
	requestCh   chan struct{}
	reqWatchers map[int]func()
	reqNext     int
	notify      func() // tells the manager (the dashboard) of a change
	denied      []Denial
	egressClose func()
	conns       []egress.Conn // the egress proxy's reports, oldest first
	touches     []Touch       // viewers' keys in the agent's commands, not yet told (touches.go)
	userFiles   []UserFile    // files viewers moved, not yet told (userfiles.go)
	files       sessionFiles  // uploads and downloads (files.go)
}

// kept is one command as it stands: a record whose streams keep filling
// while it runs, and whether it has ended.
type kept struct {
	rec  shell.Record
	done bool
}

// CommandInfo names one command of a session and where it stands.
type CommandInfo struct {
	ID      string
	Source  string // "agent" or "user"
	Command string
	Running bool
	// ExitCode is meaningful once it ended, when ExitKnown.
	ExitCode  int
	ExitKnown bool
	Started   time.Time
}

// Info is what a caller may see of its own session. It never holds a token.
type Info struct {
	Name         string
	Target       string
	Kind         string
	Host         string
	Port         int
	Username     string
	Status       string
	CreatedAt    time.Time
	LastActivity time.Time
	Cwd          string
	// Last is the session's running or latest command, the agent's or the
	// human's; nil before the first.
	Last *CommandInfo
	// HumanRequest is the agent's request for the human that has not been
	// handed back; nil when none is open.
	HumanRequest *HumanRequest
	// Redact is the session's redactor (Target.Redact): what its agent
	// reads of this info (the cwd, the last command) goes through it.
	// nil: nothing is redacted.
	Redact *redact.Redactor
}

// Info describes the session.
func (s *Session) Info() Info {
	// The shell's lock before the session's, never inside it: the shell
	// files commands (keep) with its own lock held.
	cwd := s.sh.Cwd()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StatusActive
	if s.endReason != "" {
		st = StatusEnded
	}
	i := Info{
		Name: s.Name, Target: s.Target.Name, Kind: s.Target.Kind, Host: s.Target.Host,
		Port: s.Target.Port, Username: s.Target.Username, Status: st,
		CreatedAt: s.CreatedAt, LastActivity: s.lastActivity, Cwd: cwd,
		Redact: s.Target.Redact,
	}
	if r := s.request; r != nil && !r.HandedBack {
		open := *r
		i.HumanRequest = &open
	}
	if recent := s.recentLocked(1); len(recent) == 1 {
		i.Last = &recent[0]
	}
	return i
}

// Recent lists the session's latest n commands, the agent's and the
// human's, oldest first, as they stand.
func (s *Session) Recent(n int) []CommandInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recentLocked(n)
}

// recentLocked is Recent; s.mu is held.
func (s *Session) recentLocked(n int) []CommandInfo {
	var out []CommandInfo
	for j := len(s.hist.order) - 1; j >= s.hist.first && len(out) < n; j-- {
		k, ok := s.hist.lookup(s.hist.order[j])
		if !ok || k.rec.Source != "agent" && k.rec.Source != "user" {
			continue // a listing tandem wrote, or background output
		}
		out = append(out, CommandInfo{ID: k.rec.ID, Source: k.rec.Source, Command: k.rec.Command, Running: !k.done,
			ExitCode: k.rec.ExitCode, ExitKnown: k.rec.ExitKnown, Started: k.rec.Started})
	}
	slices.Reverse(out)
	return out
}

// Caller is who owns the session.
func (s *Session) Caller() Caller { return s.caller }

// TokenHash is the SHA-256 of the session token; the token itself is
// never kept.
func (s *Session) TokenHash() [32]byte { return s.tokenHash }

// EndReason is why the session ended, or "" while it lives.
func (s *Session) EndReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endReason
}

// MonitorKey is the capability key of the session's browser terminal.
func (s *Session) MonitorKey() string { return s.monitorKey }

func (s *Session) touch() {
	s.mu.Lock()
	s.lastActivity = time.Now()
	s.mu.Unlock()
}

// GateError blocks an agent call because the human ran commands since the
// agent's last call. Returning it resets the gate.
type GateError struct {
	Since    time.Time
	Commands []shell.Record
	// Keep files a text as a readable output of the session (a listing
	// of a history too long for one reply) and returns the id that
	// reads it back. Nil in tests that build a GateError by hand.
	Keep func(text []byte) string
}

func (e *GateError) Error() string {
	return fmt.Sprintf("%d user commands executed since the last agent command", len(e.Commands))
}

// Gate trips once if the human ran commands since the agent's last call:
// it returns them all, in order, and resets. There is no way around it.
// While the human holds the session at the agent's request, their
// commands wait for the hand-back, which reports them.
func (s *Session) Gate() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tripLocked(false)
}

// tripLocked takes the human's commands the gate holds; all of them when
// forced (the hand-back, the session's end); s.mu is held.
func (s *Session) tripLocked(force bool) error {
	if len(s.pending) == 0 || (!force && s.request != nil && !s.request.HandedBack) {
		return nil
	}
	e := &GateError{Since: s.pending[0].Started, Commands: s.pending, Keep: s.keepText}
	s.hist.reported(s.pending)
	s.pending = nil
	return e
}

// keepText files text as a finished output of the session, readable by
// the id it returns like any command's.
func (s *Session) keepText(text []byte) string {
	id := "hist_" + newID()
	f := s.spool.New(id + ".out")
	_, _ = f.Write(text)
	_ = f.Close()
	s.keep(shell.Record{ID: id, Source: "tandem", Command: "the human's commands the gate reported", Stdout: f,
		ExitKnown: true, Started: time.Now(), Merged: true}, true)
	return id
}

// endedError describes the ended session to its owner, with the human's
// commands the gate still held: they are delivered with the end, once.
func (s *Session) endedError() *EndedError {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := &EndedError{Name: s.Name, Reason: s.endReason, At: s.endedAt, Session: s}
	if g, ok := s.tripLocked(true).(*GateError); ok {
		e.Gate = g
	}
	return e
}

func (s *Session) userCommand(r shell.Record) {
	s.mu.Lock()
	s.pending = append(s.pending, r)
	if e, ok := s.hist.entries[r.ID]; ok {
		e.unreported = true
	}
	s.lastActivity = time.Now()
	s.mu.Unlock()
	s.changed() // the page's gate count
}

// Command finds one of the session's latest commands, the agent's or the
// human's, by ID: its record as it stands and whether it has ended. A
// running command's streams keep growing; its exit code and duration are
// final only once done.
func (s *Session) Command(id string) (rec Record, done, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.hist.lookup(id)
	if !ok {
		return Record{}, false, false
	}
	rec, done = k.rec, k.done
	if !done {
		rec.Duration = time.Since(rec.Started)
		// A command cut off by its shell's end (exit, a lost connection)
		// never reports an end of its own: its output is complete.
		select {
		case <-s.sh.Done():
			done, rec.ExitKnown = true, false
		default:
		}
	}
	return rec, done, true
}

// Exec passes the gate and runs command in the session's shell. The gate is
// checked atomically with the shell's idle check, so no human command can
// slip between them; o.Admit is always the gate.
func (s *Session) Exec(ctx context.Context, command string, o shell.ExecOptions) (shell.Record, error) {
	s.touch()
	o.Admit = func() error { // the human's request and the gate, under one lock
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.humanHoldsLocked(); err != nil {
			return err
		}
		return s.tripLocked(false)
	}
	rec, err := s.sh.Exec(ctx, command, o)
	s.touch()
	if err != nil {
		// A command that outlived the call, or whose shell died, can still
		// be read back; its end, if it comes, is filed by commandDone.
		s.keep(rec, false)
		return rec, s.wrapShellErr(err)
	}
	return rec, nil
}

// HoldAgent marks the agent's running command as waiting for a human's
// decision id (see shell.Shell.HoldAgent); ok is false when none runs.
func (s *Session) HoldAgent(id string, wait time.Duration) (release func(), ok bool) {
	return s.sh.HoldAgent(id, wait)
}

// AwaitHeld goes on waiting for the agent's command id after an Exec
// returned because a program or connection of it waited for a human (see
// shell.Shell.AwaitHeld): the record once it ended, or a *TimeoutError,
// with Held set when it waits for another decision than skip.
func (s *Session) AwaitHeld(ctx context.Context, id string, d time.Duration, skip string) (Record, error) {
	s.touch()
	held, running, err := s.sh.AwaitHeld(ctx, id, d, skip)
	if err != nil {
		rec, _, _ := s.Command(id)
		return rec, s.wrapShellErr(err)
	}
	if running {
		rec, _, _ := s.Command(id)
		te := &TimeoutError{Partial: rec, Held: held}
		if held == "" {
			te.State, _ = s.sh.State(id)
		}
		return rec, te
	}
	// Ended: its end is filed a moment later (commandDone).
	s.WaitCommand(ctx, id, endFiledWait, func(_ Record, done bool) bool { return done })
	rec, done, ok := s.Command(id)
	switch {
	case !ok:
		return Record{}, fmt.Errorf("session %q: command %s is no longer kept: %w", s.Name, id, ErrNotRunning)
	case !done:
		return rec, &TimeoutError{Partial: rec}
	}
	return rec, nil
}

// endFiledWait bounds the wait for an ended command's record to be filed.
const endFiledWait = 2 * time.Second

// Cancel interrupts the agent's running command.
func (s *Session) Cancel(ctx context.Context) (shell.Record, error) {
	if err := s.AgentMayAct(); err != nil {
		return shell.Record{}, err
	}
	if err := s.Gate(); err != nil {
		return shell.Record{}, err
	}
	s.touch()
	rec, err := s.sh.Cancel(ctx, 0)
	if err != nil {
		return rec, s.wrapShellErr(err)
	}
	return rec, nil
}

func (s *Session) wrapShellErr(err error) error {
	if errors.Is(err, shell.ErrConnectionLost) || errors.Is(err, shell.ErrShellExited) {
		return fmt.Errorf("session %q: %w", s.Name, err)
	}
	return err
}

// Watch streams the terminal to a viewer; see shell.Shell.Watch.
func (s *Session) Watch(ctx context.Context, fn func(p []byte) error) error {
	return s.sh.Watch(ctx, fn)
}

// SendInput types the agent's input into its own running command id (an
// answer at a prompt); see shell.Shell.SendInput. The gate applies as to
// every call that acts on the shell.
func (s *Session) SendInput(ctx context.Context, id string, input []byte) (echo int, err error) {
	if err := s.AgentMayAct(); err != nil {
		return 0, err
	}
	if err := s.Gate(); err != nil {
		return 0, err
	}
	s.touch()
	echo, err = s.sh.SendInput(ctx, id, input)
	if err != nil {
		return echo, s.wrapShellErr(err)
	}
	return echo, nil
}

// RedactText replaces the session's secrets in text the agent typed, as
// in output, for the audit; see shell.Shell.RedactText.
func (s *Session) RedactText(t string) string { return s.sh.RedactText(t) }

// TakeBackground returns the output background jobs printed since the
// last call, filed for read-back by its ID; ok is false when there was
// none.
func (s *Session) TakeBackground() (Record, bool) {
	rec, ok := s.sh.TakeBackground()
	if ok {
		s.keep(rec, true)
	}
	return rec, ok
}

// State reports what the agent's running command id does with the
// terminal; ok is false when it is not the running agent command.
func (s *Session) State(id string) (InputState, bool) { return s.sh.State(id) }

// WaitCommand waits up to d until cond, given command id's record as it
// stands and whether it ended, holds; it is checked again whenever the
// shell shows output or changes state. It reports whether cond held.
func (s *Session) WaitCommand(ctx context.Context, id string, d time.Duration, cond func(rec Record, done bool) bool) bool {
	return s.sh.Wait(ctx, d, func() bool {
		rec, done, ok := s.Command(id)
		return !ok || cond(rec, done)
	})
}

// Input types a human's keystrokes into the terminal.
func (s *Session) Input(ctx context.Context, p []byte) error {
	s.touch()
	return s.sh.Input(ctx, p)
}

// Resize resizes the terminal.
func (s *Session) Resize(ctx context.Context, cols, rows int) error {
	return s.sh.Resize(ctx, cols, rows)
}

// Err reports why the session's shell is unusable, or nil.
func (s *Session) Err() error { return s.sh.Err() }

// deathReason names why the session's dead shell ended, once its terminal
// has been read out (its last command filed): a human ended it (exit,
// Ctrl-D), it exited on its own (an agent's exit, set -e), or the
// transport broke.
func (s *Session) deathReason() string {
	select {
	case <-s.sh.Drained():
	case <-time.After(drainWait):
	}
	switch {
	case !errors.Is(s.sh.Err(), shell.ErrShellExited):
		return EndConnectionLost
	case s.sh.EndedByHuman():
		return EndHumanExit
	}
	return EndShellExited
}

// drainWait bounds the wait for a dead shell's terminal to be read out.
const drainWait = 3 * time.Second

func newToken(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hashToken(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }

func tokenMatches(h [32]byte, tok string) bool {
	got := hashToken(tok)
	return subtle.ConstantTimeCompare(h[:], got[:]) == 1
}
