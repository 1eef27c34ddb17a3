package session

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/seal"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/spool"
)

// Errors the mcp layer maps to stable codes.
var (
	// ErrInvalidToken covers an unknown name, another caller's session and a
	// wrong token alike, so a caller learns nothing about sessions not its own.
	ErrInvalidToken = errors.New("invalid or missing session token")
	ErrNameTaken    = errors.New("session name already in use")
	ErrInvalidName  = errors.New("invalid session name")
)

// TokenError is ErrInvalidToken for one session name.
type TokenError struct{ Name string }

func (e *TokenError) Error() string {
	return fmt.Sprintf("invalid or missing session token for session %q", e.Name)
}

// Unwrap lets errors.Is match ErrInvalidToken.
func (e *TokenError) Unwrap() error { return ErrInvalidToken }

// EndedError is returned for a session of the caller's that has ended.
type EndedError struct {
	Name   string
	Reason string
	At     time.Time
	// Gate holds the human's commands the agent had not been told of
	// when the session ended, once: the last of them may have ended it.
	Gate *GateError
	// Session is the ended session, when it ended in this process: what
	// viewers did to the agent's commands before the end is still to be
	// told (TakeTouches).
	Session *Session
}

func (e *EndedError) Error() string {
	return fmt.Sprintf("session %q ended (%s)", e.Name, e.Reason)
}

// Options configures a Manager. A nil *Options means all defaults.
type Options struct {
	// Logger receives lifecycle logs. Nil discards them.
	Logger *slog.Logger
	// IdleTimeout ends a session with no agent call, no human input and no
	// running command for this long; zero means 30 minutes.
	IdleTimeout time.Duration
	// MaxLifetime ends a session this long after it started; zero means 12 hours.
	MaxLifetime time.Duration
	// Cols and Rows are the initial terminal size; zero means 120x32.
	Cols, Rows int
	// OnEnd, if set, is told when a session ends and why.
	OnEnd func(s *Session, reason string)
	// Spool captures command output; nil keeps it in memory (tests only).
	Spool *spool.Dir
	// KeptOutputBytes bounds the disk one session's finished commands
	// take (their outputs, and the index of older ones): past it the
	// oldest are removed (history.go); zero means DefaultKeptOutputBytes.
	KeptOutputBytes int64
	// RecordingBytes bounds the terminal output and input a session's
	// recording keeps (recording.Writer.Cap); zero: no bound.
	RecordingBytes int64
	// RecordingsDir, if set, receives one asciicast v2 file per session.
	RecordingsDir string
	// Journal, if set, keeps the session directory, command history and
	// lifecycle audit.
	Journal Journal
}

// Journal keeps what must outlive the process. The session layer calls it
// outside its own locks, except CommandDone, which must not block.
type Journal interface {
	// SessionStarted records a new session before its token is handed out.
	SessionStarted(ctx context.Context, s *Session) error
	// SessionEnded records the end of a session and why.
	SessionEnded(ctx context.Context, s *Session, reason string)
	// CommandDone records a finished command, the agent's or the human's.
	// It is called with the shell's lock held.
	CommandDone(s *Session, rec shell.Record)
	// Ended finds a session of the tenant's, by name, that ended in an
	// earlier process and whose token hash matches.
	Ended(ctx context.Context, tenant, name string, tokenHash [32]byte) (reason string, at time.Time, ok bool)
	// Replay finds the recording of an ended session, of this process or
	// an earlier one, by the hash of its monitoring key.
	Replay(ctx context.Context, keyHash [32]byte) (name, path string, ok bool)
	// OutputsRemoved records that the spool files of these commands were
	// deleted to keep the session within KeptOutputBytes (history.go).
	// Like CommandDone it is called with the shell's lock held, after the
	// CommandDone of each, and must not block.
	OutputsRemoved(s *Session, commandIDs []string)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// key names a session: names are per owner, so one caller never learns
// which names another uses.
type key struct {
	owner Caller
	name  string
}

// Manager is the registry of live sessions.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[key]*Session
	reserved map[key]bool
	ended    map[key]*Session // last ended session per name, for clear errors
	byKey    map[[32]byte]*Session
	replays  map[[32]byte]*Session // ended sessions whose recording is complete
	ending   int                   // ends in progress
	settled  *sync.Cond            // signalled when ending drops

	draining bool // Drain was called: no new sessions

	watchMu     sync.Mutex
	watchers    map[int]func() // told of sessions' starts, ends and commands
	nextWatcher int
}

// NewManager returns an empty registry.
func NewManager(opts *Options) *Manager {
	m := &Manager{
		sessions: map[key]*Session{},
		reserved: map[key]bool{},
		ended:    map[key]*Session{},
		byKey:    map[[32]byte]*Session{},
		replays:  map[[32]byte]*Session{},
	}
	m.settled = sync.NewCond(&m.mu)
	if opts != nil {
		m.opts = *opts
	}
	if m.opts.IdleTimeout <= 0 {
		m.opts.IdleTimeout = 30 * time.Minute
	}
	if m.opts.MaxLifetime <= 0 {
		m.opts.MaxLifetime = 12 * time.Hour
	}
	if m.opts.KeptOutputBytes <= 0 {
		m.opts.KeptOutputBytes = DefaultKeptOutputBytes
	}
	m.log = m.opts.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	return m
}

// Create starts a shell on t and registers it as name, owned by c. It
// returns the session token, which is shown once and kept only as a hash.
func (m *Manager) Create(ctx context.Context, c Caller, name string, t Target) (*Session, string, error) {
	if !nameRE.MatchString(name) {
		return nil, "", fmt.Errorf("%w: %q must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", ErrInvalidName, name)
	}
	k := key{c, name}
	m.mu.Lock()
	if m.draining {
		m.mu.Unlock()
		return nil, "", ErrDraining
	}
	if m.sessions[k] != nil || m.reserved[k] {
		m.mu.Unlock()
		return nil, "", fmt.Errorf("%w: %q", ErrNameTaken, name)
	}
	m.reserved[k] = true
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.reserved, k)
		m.mu.Unlock()
	}()

	tok, err := newToken(24)
	if err != nil {
		return nil, "", err
	}
	mk, err := newToken(32)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	s := &Session{
		ID: newID(), Name: name, Target: t, CreatedAt: now, caller: c,
		tokenHash: hashToken(tok), monitorKey: mk, lastActivity: now, spool: m.opts.Spool,
		requestCh: make(chan struct{}), notify: m.changed, keptBytes: m.opts.KeptOutputBytes,
	}
	if j := m.opts.Journal; j != nil {
		s.hist.removed = func(ids []string) { j.OutputsRemoved(s, ids) }
	}
	so := &shell.Options{
		Logger: m.log.With("session", name), Cols: m.opts.Cols, Rows: m.opts.Rows,
		OnCommand: func(r shell.Record) { m.commandDone(s, r) }, Spool: m.opts.Spool,
		// A human's running command can be read back, and named when busy.
		OnStart: func(r shell.Record) { s.keep(r, false); s.markCommand(r, false) },
		OnTouch: s.touched,
		Redact:  t.Redact, RedactViewers: t.RedactViewers,
	}
	if k, sp := t.RawKey, m.opts.Spool; k != nil && sp != nil {
		so.Raw = func(name string) shell.RawSink { return capRaw(seal.Create(sp.SealedPath(name), *k), sp.MaxFile) }
	}
	if t.JudgeExec != nil {
		so.JudgeExec = func(ctx context.Context, x shell.ExecInfo) shell.ExecRuling { return t.JudgeExec(ctx, s, x) }
	}
	if err := s.openEgress(ctx, so); err != nil {
		return nil, "", fmt.Errorf("connect %q: egress proxy: %w", name, err)
	}
	if err := m.record(s, so); err != nil {
		s.closeEgress()
		return nil, "", fmt.Errorf("connect %q: %w", name, err)
	}
	sh, err := shell.Start(ctx, t.Dialer, so)
	if err != nil {
		s.closeEgress()
		s.closeRecording()
		return nil, "", fmt.Errorf("connect %q: %w", name, err)
	}
	s.sh = sh
	s.files.root = sh.Cwd()
	if t.Kind == "local" && t.Workspace != "" {
		s.files.root = t.Workspace
	}
	if j := m.opts.Journal; j != nil {
		if err := j.SessionStarted(ctx, s); err != nil {
			_ = sh.Close()
			s.closeEgress()
			s.closeRecording()
			return nil, "", fmt.Errorf("connect %q: record the session: %w", name, err)
		}
	}
	m.mu.Lock()
	m.sessions[k] = s
	delete(m.ended, k)
	m.byKey[sha256.Sum256([]byte(mk))] = s
	m.mu.Unlock()
	go m.watch(s)
	m.changed()
	m.log.Info("session started", "session", name, "target", t.Name, "kind", t.Kind)
	return s, tok, nil
}

// commandDone files a finished command: a human's goes to the gate, and
// every command goes to the journal. The shell's lock is held.
func (m *Manager) commandDone(s *Session, r shell.Record) {
	s.keep(r, true)
	s.markCommand(r, true)
	if r.Source == "user" {
		s.userCommand(r)
	}
	s.mu.Lock()
	s.lastCommand = r.Command
	s.mu.Unlock()
	m.changed()
	if j := m.opts.Journal; j != nil {
		j.CommandDone(s, r)
	}
}

// watch ends the session when its shell dies on its own, once the
// terminal's last output (the human's last command) has been filed.
func (m *Manager) watch(s *Session) {
	<-s.sh.Done()
	m.end(s, s.deathReason())
}

// Lookup returns the caller's session if the token matches. Every failure
// that could reveal another caller's session is ErrInvalidToken.
func (m *Manager) Lookup(c Caller, name, token string) (*Session, error) {
	k := key{c, name}
	m.mu.Lock()
	s := m.sessions[k]
	ended := m.ended[k]
	m.mu.Unlock()
	if s == nil && ended != nil && ended.caller == c && tokenMatches(ended.tokenHash, token) {
		return nil, ended.endedError()
	}
	if s == nil && token != "" && m.opts.Journal != nil {
		// A session of an earlier process: the token is the proof.
		if reason, at, ok := m.opts.Journal.Ended(context.Background(), c.Tenant, name, hashToken(token)); ok {
			return nil, &EndedError{Name: name, Reason: reason, At: at}
		}
	}
	if s == nil || s.caller != c || token == "" || !tokenMatches(s.tokenHash, token) {
		return nil, &TokenError{Name: name}
	}
	if s.sh.Err() != nil {
		m.end(s, s.deathReason())
		return nil, s.endedError()
	}
	return s, nil
}

// LookupOutput is Lookup for reading back output: it also finds a session
// of this process that has ended, so the output of the command that ended
// it (an exit, a crash) stays readable. The checks are Lookup's.
func (m *Manager) LookupOutput(c Caller, name, token string) (*Session, error) {
	k := key{c, name}
	m.mu.Lock()
	s := m.sessions[k]
	if s == nil {
		s = m.ended[k]
	}
	m.mu.Unlock()
	if s != nil && s.caller == c && token != "" && tokenMatches(s.tokenHash, token) {
		return s, nil
	}
	return m.Lookup(c, name, token)
}

// List returns the caller's own live sessions, oldest first.
func (m *Manager) List(c Caller) []Info {
	mine := m.live(func(s *Session) bool { return s.caller == c })
	out := make([]Info, 0, len(mine))
	for _, s := range mine {
		out = append(out, s.Info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Recording finds the finished recording of an ended session by its
// capability key, for the browser replay.
func (m *Manager) Recording(key string) (name, path string, ok bool) {
	h := sha256.Sum256([]byte(key))
	m.mu.Lock()
	s := m.replays[h]
	m.mu.Unlock()
	if s != nil {
		return s.Name, s.recPath, true
	}
	if m.opts.Journal != nil {
		name, path, ok := m.opts.Journal.Replay(context.Background(), h)
		if ok && !m.isRecording(path) {
			m.log.Warn("refusing a replay outside the recordings directory", "path", path)
			return "", "", false
		}
		return name, path, ok
	}
	return "", "", false
}

// recordingName is what record names a cast: the session id, hex.
var recordingName = regexp.MustCompile(`^[0-9a-f]{16}\.cast$`)

// isRecording reports whether path is one of this data dir's recordings.
// The path comes from the database, which is a file like any other: a
// rewritten row must not make the replay page serve an arbitrary file.
func (m *Manager) isRecording(path string) bool {
	return m.opts.RecordingsDir != "" && filepath.Dir(path) == filepath.Clean(m.opts.RecordingsDir) &&
		recordingName.MatchString(filepath.Base(path))
}

// ByMonitorKey finds the session a capability key opens.
func (m *Manager) ByMonitorKey(k string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.byKey[sha256.Sum256([]byte(k))]
	return s, ok
}

// ByID finds a live session by its id, for the operator's side (the
// monitoring page's notes of what the policy refused).
func (m *Manager) ByID(id string) (*Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if s.ID == id {
			return s, true
		}
	}
	return nil, false
}

// Disconnect ends the session and its processes.
func (m *Manager) Disconnect(s *Session) error {
	if err := s.Gate(); err != nil {
		return err
	}
	m.end(s, EndDisconnected)
	return nil
}

// end closes the session once; later calls are no-ops. The claim and the
// count of ends in progress change together under m.mu, so Shutdown can
// wait for every end, including one another goroutine started.
func (m *Manager) end(s *Session, reason string) {
	k := key{s.caller, s.Name}
	m.mu.Lock()
	s.mu.Lock()
	claimed := s.endReason == ""
	if claimed {
		s.endReason, s.endedAt = reason, time.Now()
	}
	s.mu.Unlock()
	if !claimed {
		m.mu.Unlock()
		return
	}
	m.ending++
	if m.sessions[k] == s {
		delete(m.sessions, k)
		m.ended[k] = s
	}
	delete(m.byKey, sha256.Sum256([]byte(s.monitorKey)))
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.ending--
		m.settled.Broadcast()
		m.mu.Unlock()
	}()

	s.closeFiles()
	_ = s.sh.Close()
	s.closeEgress()
	if s.closeRecording() {
		m.mu.Lock()
		m.replays[sha256.Sum256([]byte(s.monitorKey))] = s
		m.mu.Unlock()
	}
	m.changed()
	m.log.Info("session ended", "session", s.Name, "reason", reason)
	if j := m.opts.Journal; j != nil {
		j.SessionEnded(context.Background(), s, reason)
	}
	if m.opts.OnEnd != nil {
		m.opts.OnEnd(s, reason)
	}
}

// Run enforces leases until ctx ends, then ends every session.
func (m *Manager) Run(ctx context.Context) {
	tick := time.NewTicker(m.tickEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			m.Shutdown()
			return
		case now := <-tick.C:
			m.reap(now)
		}
	}
}

func (m *Manager) tickEvery() time.Duration {
	d := min(m.opts.IdleTimeout, m.opts.MaxLifetime) / 10
	return max(min(d, 10*time.Second), 50*time.Millisecond)
}

func (m *Manager) reap(now time.Time) {
	for _, s := range m.live(nil) {
		s.mu.Lock()
		idle := now.Sub(s.lastActivity)
		s.mu.Unlock()
		switch {
		case now.Sub(s.CreatedAt) >= m.opts.MaxLifetime:
			m.end(s, EndMaxLifetime)
		case idle >= m.opts.IdleTimeout && !s.sh.Busy():
			// A running command is not idleness; MaxLifetime bounds it.
			m.end(s, EndIdleTimeout)
		}
	}
}

// Shutdown ends every live session and returns once every end, its own or
// one already under way elsewhere, is fully recorded.
func (m *Manager) Shutdown() {
	for _, s := range m.live(nil) {
		m.end(s, EndServerShutdown)
	}
	m.mu.Lock()
	for m.ending > 0 {
		m.settled.Wait()
	}
	m.mu.Unlock()
}

// EndOwner ends every session of a caller that has gone away: nobody else
// can ever use them.
func (m *Manager) EndOwner(c Caller) {
	for _, s := range m.live(func(s *Session) bool { return s.caller == c }) {
		m.end(s, EndDisconnected)
	}
}

// Count is the number of live sessions.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// live snapshots the live sessions that keep accepts (all when nil), so
// callers can act on them without holding the registry lock.
func (m *Manager) live(keep func(*Session) bool) []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		if keep == nil || keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// Has reports whether this process holds c's live session of that name:
// a node asks before looking for it on other nodes.
func (m *Manager) Has(c Caller, name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sessions[key{c, name}] != nil
}
