// Package journal writes what a tandem process must leave behind: the
// session directory (without tokens), every command with its spooled
// output, and the lifecycle audit records (session start and end, leases,
// restarts). It implements session.Journal on top of store and audit, and
// it is the place that ends the sessions of dead tandem processes at start.
package journal

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/store"
)

// queueLen bounds the commands waiting to be written; past it a command's
// row is dropped (and counted) rather than stalling the shell. A human's
// paste of thousands of lines must fit.
const queueLen = 16384

// Journal is one process's writer to the store and the audit log.
type Journal struct {
	st       store.Store
	audit    *audit.Log
	instance string
	log      *slog.Logger

	queue chan command
	wg    sync.WaitGroup

	mu      sync.Mutex
	dropped int64
	pending map[string]*pendingCommand // queued commands, by id, until their row is written
	queued  time.Time                  // when the last command was queued
	hurried chan struct{}              // someone waits for a row: stop yielding to a burst
}

type command struct {
	s   *session.Session
	rec shell.Record
	at  time.Time // when it was queued
	p   *pendingCommand
	// removed, when set, is not a command but commands whose spool files
	// were deleted: their rows, queued before, name no file any more.
	removed []string
}

// pendingCommand is a queued command someone may wait for: written is
// closed once its row is in the store (or failed to get there); hurry,
// once someone waits, so the writer skips its yield.
type pendingCommand struct {
	written   chan struct{}
	hurry     chan struct{}
	hurryOnce sync.Once
}

// yieldFor is how long the journal leaves a finished command alone: the
// call that ran it commits its audit record to the same store and sends
// its reply meanwhile, which is what an agent waits for. Creating the
// command's spool file and inserting its row come after.
const yieldFor = 5 * time.Millisecond

// New returns a Journal for the instance; Close stops its writer.
func New(st store.Store, l *audit.Log, instanceID string, log *slog.Logger) *Journal {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{st: st, audit: l, instance: instanceID, log: log, queue: make(chan command, queueLen),
		pending: map[string]*pendingCommand{}, hurried: make(chan struct{}, 1)}
	j.wg.Add(1)
	go j.write()
	return j
}

// Close writes what is queued and stops.
func (j *Journal) Close() {
	close(j.queue)
	j.wg.Wait()
}

// SessionStarted implements session.Journal.
func (j *Journal) SessionStarted(ctx context.Context, s *session.Session) error {
	i, c, h := s.Info(), s.Caller(), s.TokenHash()
	err := j.st.CreateSession(ctx, store.SessionRow{
		ID: s.ID, Name: s.Name, Tenant: c.Tenant, Actor: c.Actor, Owner: c.ID, InstanceID: j.instance,
		Target: i.Target, Kind: i.Kind, Host: i.Host, Port: i.Port, Username: i.Username,
		TokenHash: h[:], Status: store.StatusActive, CreatedAt: s.CreatedAt,
	})
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if p := s.RecordingPath(); p != "" {
		key := sha256.Sum256([]byte(s.MonitorKey()))
		if err := j.st.AddReplay(ctx, s.ID, key[:], p); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
	}
	_, err = j.audit.Append(ctx, j.lifecycle(s, "session_start", ""))
	return err
}

// Replay implements session.Journal: the recording of an ended session,
// found by the hash of its monitoring key, in this process or an earlier one.
func (j *Journal) Replay(ctx context.Context, keyHash [32]byte) (name, path string, ok bool) {
	r, err := j.st.FindReplay(ctx, keyHash[:])
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			j.log.Error("journal: find replay", "err", err)
		}
		return "", "", false
	}
	if r.Status != store.StatusEnded {
		return "", "", false
	}
	return r.Name, r.RecordingPath, true
}

// SessionEnded implements session.Journal. Failures are logged: the
// session is gone either way.
func (j *Journal) SessionEnded(ctx context.Context, s *session.Session, reason string) {
	now := time.Now()
	if err := j.st.EndSession(ctx, s.ID, reason, now); err != nil {
		j.log.Error("journal: end session", "session", s.Name, "err", err)
	}
	event := "session_end"
	if reason == session.EndIdleTimeout || reason == session.EndMaxLifetime {
		event = "lease_expired"
	}
	if _, err := j.audit.Append(ctx, j.lifecycle(s, event, reason)); err != nil {
		j.log.Error("journal: audit session end", "session", s.Name, "err", err)
	}
}

func (j *Journal) lifecycle(s *session.Session, event, reason string) audit.Record {
	c := s.Caller()
	return audit.Record{
		Time: time.Now(), Tenant: c.Tenant, Actor: c.ID, SessionID: s.ID, SessionName: s.Name,
		Target: s.Target.Name, Event: event, Outcome: "ok", Reason: reason,
	}
}

// CommandDone implements session.Journal; it only queues.
func (j *Journal) CommandDone(s *session.Session, rec shell.Record) {
	p := &pendingCommand{written: make(chan struct{}), hurry: make(chan struct{})}
	j.mu.Lock()
	j.pending[rec.ID] = p
	j.queued = time.Now()
	j.mu.Unlock()
	select {
	case j.queue <- command{s: s, rec: rec, at: time.Now(), p: p}:
	default:
		j.mu.Lock()
		j.dropped++
		j.mu.Unlock()
		j.settled(rec.ID, p)
		j.log.Error("journal: command queue full; command not recorded", "session", s.Name, "command", rec.ID)
	}
}

// OutputsRemoved implements session.Journal; it only queues, behind the
// rows of the commands it names.
func (j *Journal) OutputsRemoved(s *session.Session, ids []string) {
	select {
	case j.queue <- command{s: s, removed: ids}:
	default:
		j.log.Error("journal: command queue full; removed outputs not recorded", "session", s.Name, "commands", len(ids))
	}
}

// Recorded waits until the row of a finished command is written, so that
// another node can find the command by its id; a command not queued (never
// run here, still running, or written already) returns at once. A node
// that hands out an output's URI calls it first: any node may get the read.
func (j *Journal) Recorded(ctx context.Context, id string) error {
	j.mu.Lock()
	p := j.pending[id]
	j.mu.Unlock()
	if p == nil {
		return nil
	}
	p.hurryOnce.Do(func() { close(p.hurry) })
	select {
	case j.hurried <- struct{}{}:
	default:
	}
	select {
	case <-p.written:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("journal: command %s not recorded yet: %w", id, ctx.Err())
	}
}

// settled ends a command's wait, written or not.
func (j *Journal) settled(id string, p *pendingCommand) {
	j.mu.Lock()
	if j.pending[id] == p {
		delete(j.pending, id)
	}
	j.mu.Unlock()
	close(p.written)
}

// write persists queued commands: spooled output to files, then the row.
func (j *Journal) write() {
	defer j.wg.Done()
	for c := range j.queue {
		if c.removed != nil {
			if err := j.st.OutputsRemoved(context.Background(), c.removed); err != nil {
				j.log.Error("journal: record removed outputs", "commands", len(c.removed), "err", err)
			}
			continue
		}
		if wait := time.Until(c.at.Add(yieldFor)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-c.p.hurry:
				t.Stop()
			}
		}
		if rec := c.rec; rec.Source == "user" {
			j.yieldToBurst()
		}
		rec := c.rec
		if red := c.s.Target.RedactHeld; red != nil {
			// The history page and the audit show the line as typed, but
			// never a credential tandem holds for the session.
			rec.Command, _ = red.String(rec.Command)
		}
		outPath, err1 := persist(rec.Stdout)
		errPath, err2 := persist(rec.Stderr)
		if err := errors.Join(err1, err2); err != nil {
			j.log.Error("journal: spool output", "command", rec.ID, "err", err)
		}
		if lost := rec.Stdout.Lost() + rec.Stderr.Lost(); lost > 0 {
			// The row counts the bytes kept; the log says how many are not.
			j.log.Error("journal: output cut short", "command", rec.ID, "lost_bytes", lost)
		}
		row := store.CommandRow{
			ID: rec.ID, SessionID: c.s.ID, Source: rec.Source, Command: rec.Command, Cwd: rec.Cwd,
			StartedAt: rec.Started, DurationMs: rec.Duration.Milliseconds(),
			StdoutBytes: rec.Stdout.Size(), StderrBytes: rec.Stderr.Size(), StdoutPath: outPath, StderrPath: errPath,
			Connections: connectionsOf(c.s, rec),
		}
		if rec.ExitKnown {
			code := rec.ExitCode
			row.ExitCode = &code
		}
		if err := j.st.AddCommand(context.Background(), row); err != nil {
			j.log.Error("journal: record command", "command", rec.ID, "err", err)
		}
		if rec.Source == "user" {
			j.humanCommand(c.s, rec, row.ExitCode)
		}
		if len(rec.Execs) > 0 || rec.ExecsOmitted > 0 {
			j.commandExecs(c.s, rec)
		}
		j.settled(rec.ID, c.p)
	}
}

// humanCommand audits a command a human ran in the session's terminal,
// beside the agent's calls: who typed it, what ran, how it ended.
func (j *Journal) humanCommand(s *session.Session, rec shell.Record, exit *int) {
	args := map[string]any{"source": "human", "viewer": rec.Viewer, "command": rec.Command, "commandId": rec.ID, "cwd": rec.Cwd}
	if rec.Unattributed {
		args["unattributed"] = true
	}
	b, err := json.Marshal(args)
	if err != nil {
		return
	}
	c := s.Caller()
	actor := rec.Viewer
	if actor == "" {
		actor = "human"
	}
	_, err = j.audit.Append(context.Background(), audit.Record{
		Time: rec.Started, Tenant: c.Tenant, Actor: actor, SessionID: s.ID, SessionName: s.Name, Target: s.Target.Name,
		Event: "human_command", Args: b, Outcome: "ok", ExitCode: exit, DurationMs: rec.Duration.Milliseconds(),
		Bytes: rec.Stdout.Size() + rec.Stderr.Size(),
	})
	if err != nil {
		j.log.Error("journal: audit human command", "command", rec.ID, "err", err)
	}
}

// EventCommandExecs is the audit event that lists the programs one
// command started in a local session whose execs are judged.
const EventCommandExecs = "command_execs"

// commandExecs audits the programs a command started: each one's argv,
// cwd and decision (the first shell.MaxExecRecords, then a count), and
// those that were refused. Exit statuses are not known: the judge sees a
// program start, not end.
func (j *Journal) commandExecs(s *session.Session, rec shell.Record) {
	args := map[string]any{"commandId": rec.ID, "source": rec.Source, "command": rec.Command, "execs": rec.Execs}
	if rec.ExecsOmitted > 0 {
		args["execsOmitted"] = rec.ExecsOmitted
	}
	outcome := "ok"
	if len(rec.Blocked) > 0 {
		args["blocked"] = rec.Blocked
		outcome = "blocked"
	}
	b, err := json.Marshal(args)
	if err != nil {
		return
	}
	c := s.Caller()
	actor := c.ID
	if rec.Source == "user" {
		actor = "human"
		if rec.Viewer != "" {
			actor = rec.Viewer
		}
	}
	_, err = j.audit.Append(context.Background(), audit.Record{
		Time: rec.Started, Tenant: c.Tenant, Actor: actor, SessionID: s.ID, SessionName: s.Name, Target: s.Target.Name,
		Tool: "ssh_exec", Event: EventCommandExecs, Args: b, Outcome: outcome, DurationMs: rec.Duration.Milliseconds(),
		Reason: execSummary(rec),
	})
	if err != nil {
		j.log.Error("journal: audit command execs", "command", rec.ID, "err", err)
	}
}

// execSummary names a command's programs in one line for the audit's
// reason column (the dashboard's audit table, tandem audit tail): how many,
// then each argv with its decision, cut at about 500 bytes.
func execSummary(rec shell.Record) string {
	n := len(rec.Execs) + rec.ExecsOmitted
	var b strings.Builder
	fmt.Fprintf(&b, "%d program(s)", n)
	if len(rec.Blocked) > 0 {
		fmt.Fprintf(&b, ", %d refused", len(rec.Blocked))
	}
	b.WriteString(":")
	for _, e := range rec.Execs {
		if b.Len() > 500 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " [%s] %s;", e.Decision, strings.Join(e.Argv[:min(len(e.Argv), 16)], " "))
	}
	s := b.String()
	if len(s) > 600 {
		s = strings.ToValidUTF8(s[:600], "") + "…"
	}
	return s
}

// Bursts of human commands (a paste of thousands of lines) run first:
// their rows wait until commands stop coming for burstQuiet, at most
// burstMax, so that writing them (a file and two rows each) does not take
// the CPU the paste runs on.
const (
	burstQuiet = 50 * time.Millisecond
	burstMax   = 30 * time.Second
)

// yieldToBurst waits while commands keep being queued, unless someone
// waits for a row.
func (j *Journal) yieldToBurst() {
	deadline := time.Now().Add(burstMax)
	for {
		j.mu.Lock()
		quiet := time.Since(j.queued)
		j.mu.Unlock()
		if quiet >= burstQuiet || time.Now().After(deadline) {
			return
		}
		t := time.NewTimer(burstQuiet - quiet)
		select {
		case <-t.C:
		case <-j.hurried:
			t.Stop()
			return
		}
	}
}

// persist puts a non-empty stream in its spool file; an empty stream
// needs no file (its row says 0 bytes).
func persist(f *spool.File) (string, error) {
	if f.Size() == 0 {
		return "", nil
	}
	path, err := f.Persist()
	if errors.Is(err, spool.ErrRemoved) {
		// Removed before its row was written, to keep the session's
		// outputs within limits.keptOutputBytes: the row keeps its byte
		// counts and no path.
		return "", nil
	}
	return path, err
}

// Ended implements session.Journal: the token hash is compared in
// constant time against the tenant's ended sessions of that name.
func (j *Journal) Ended(ctx context.Context, tenant, name string, tokenHash [32]byte) (string, time.Time, bool) {
	rows, err := j.st.FindEnded(ctx, tenant, name)
	if err != nil {
		j.log.Error("journal: find ended session", "err", err)
		return "", time.Time{}, false
	}
	for _, r := range rows {
		if subtle.ConstantTimeCompare(r.TokenHash, tokenHash[:]) == 1 {
			return r.EndReason, r.EndedAt, true
		}
	}
	return "", time.Time{}, false
}

// EndServerRestart is the reason for sessions whose process died.
const EndServerRestart = "server_restart"

// EndNodeLost is the reason for sessions whose node, sharing the store
// with this one, stopped renewing its lease while this one ran.
const EndNodeLost = "node_lost"

// Recover ends, with server_restart, every session the store still calls
// active whose process is gone, and audits each. alive says whether an
// instance id belongs to a live process; live neighbours are never touched.
func (j *Journal) Recover(ctx context.Context, alive func(id string) (bool, error)) (int, error) {
	return j.Reap(ctx, alive, EndServerRestart)
}

// Reap is Recover with the reason given: a node that runs on reaps its
// lost neighbours with node_lost. Each session is ended, and audited, by
// one node only, however many reap at once.
func (j *Journal) Reap(ctx context.Context, alive func(id string) (bool, error), reason string) (int, error) {
	active, err := j.st.ActiveSessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("journal: recover: %w", err)
	}
	dead := map[string]bool{}
	for _, r := range active {
		if r.InstanceID == j.instance {
			continue
		}
		if _, seen := dead[r.InstanceID]; seen {
			continue
		}
		live, err := alive(r.InstanceID)
		if err != nil {
			return 0, fmt.Errorf("journal: recover: %w", err)
		}
		dead[r.InstanceID] = !live
	}
	n := 0
	now := time.Now()
	for id, isDead := range dead {
		if !isDead {
			continue
		}
		ended, err := j.st.EndSessionsOf(ctx, id, reason, now)
		if err != nil {
			return n, fmt.Errorf("journal: recover: %w", err)
		}
		for _, r := range ended {
			args, _ := json.Marshal(map[string]string{"instance": id})
			_, err := j.audit.Append(ctx, audit.Record{
				Time: now, Tenant: r.Tenant, Actor: r.Owner, SessionID: r.ID, SessionName: r.Name,
				Target: r.Target, Event: reason, Outcome: "ok", Reason: reason, Args: args,
			})
			if err != nil {
				return n, err
			}
			n++
		}
		if err := j.denyApprovalsOf(ctx, id, reason, now); err != nil {
			return n, err
		}
		if err := j.st.EndInstance(ctx, id, now); err != nil {
			j.log.Warn("journal: end instance", "instance", id, "err", err)
		}
	}
	return n, nil
}

// connectionsOf lists, for a command's row, the connections its programs
// asked the session's egress proxy for while it ran.
func connectionsOf(s *session.Session, rec session.Record) []store.Connection {
	var out []store.Connection
	for _, c := range s.Connections(rec.Started, rec.Started.Add(rec.Duration)) {
		d := c.Duration
		if !c.Ended && (c.Decision == egress.Allowed || c.Decision == egress.Approved) {
			d = time.Since(c.Started)
		}
		out = append(out, store.Connection{Host: c.Host, Port: int(c.Port), Addr: c.Addr, Decision: c.Decision,
			BytesUp: c.Up, BytesDown: c.Down, DurationMs: d.Milliseconds(), Method: c.Method, Path: c.Path, Credential: c.Credential})
	}
	return out
}
