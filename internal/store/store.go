package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Store is what the rest of tandem needs from durable state, whatever holds
// it: SQLite on one machine (package store/sqlite), PostgreSQL for several
// nodes (package store/postgres). Every method is safe for concurrent use by
// goroutines and by other processes using the same database. The
// conformance suite in package store/storetest pins these semantics down;
// both backends pass it.
//
// A method that cannot reach the database returns an error matching
// [ErrUnavailable]. Times come back in UTC. An audit record's Time comes
// back exactly as stored, to the nanosecond, since its hash covers it;
// other times at least to the microsecond (PostgreSQL's precision; SQLite
// keeps nanoseconds). Strings must be valid UTF-8 without NUL bytes:
// PostgreSQL refuses others.
type Store interface {
	// RegisterInstance records a starting tandem process. Its heartbeat
	// starts at in.StartedAt.
	RegisterInstance(ctx context.Context, in Instance) error
	// Heartbeat says instance id is still alive at time at. It returns
	// ErrInstanceEnded if a neighbour has already declared it dead, so the
	// process learns its sessions were ended under it.
	Heartbeat(ctx context.Context, id string, at time.Time) error
	// DeadInstances lists instances not ended whose last heartbeat is older
	// than staleBefore: processes that died without ending themselves.
	DeadInstances(ctx context.Context, staleBefore time.Time) ([]Instance, error)
	// EndInstance marks an instance ended; ending it twice is a no-op.
	EndInstance(ctx context.Context, id string, at time.Time) error
	// Instance returns one instance, ended or not; ErrNotFound if the id
	// was never registered. On a shared database it tells a live neighbour
	// (a recent heartbeat) from a dead one.
	Instance(ctx context.Context, id string) (Instance, error)

	// CreateSession adds an active session to the directory. Its instance
	// must be registered.
	CreateSession(ctx context.Context, s SessionRow) error
	// EndSession marks a session ended with a reason; a session already
	// ended keeps its first reason and time.
	EndSession(ctx context.Context, id, reason string, at time.Time) error
	// EndSessionsOf ends every active session of one instance and returns
	// the sessions it ended, so that each is audited exactly once even when
	// two processes reap the same dead instance.
	EndSessionsOf(ctx context.Context, instanceID, reason string, at time.Time) ([]SessionRow, error)
	// FindEnded returns the ended sessions of a tenant with that name, most
	// recently ended first, so a call naming one after a restart can be told
	// it ended (the caller compares the token hash).
	FindEnded(ctx context.Context, tenant, name string) ([]SessionRow, error)
	// ActiveSessionsOf returns one caller's active sessions (tenant, actor
	// and owner), oldest first: what a node reads to list or reach them
	// without reading every other caller's.
	ActiveSessionsOf(ctx context.Context, tenant, actor, owner string) ([]SessionRow, error)
	// ActiveSessions returns every session the directory calls active,
	// oldest first.
	ActiveSessions(ctx context.Context) ([]SessionRow, error)
	// Session returns one session, active or ended; ErrNotFound if the id
	// is unknown. It tells a node which node holds a session's shell.
	Session(ctx context.Context, id string) (SessionRow, error)
	// ActiveSession returns the active session named name of one caller
	// (tenant, actor and owner); ErrNotFound if there is none. A node that
	// does not hold it finds here the node that does.
	ActiveSession(ctx context.Context, tenant, actor, owner, name string) (SessionRow, error)

	// AddCommand records one finished (or abandoned) command of a session.
	AddCommand(ctx context.Context, c CommandRow) error
	// Commands returns a session's commands in the order they started.
	Commands(ctx context.Context, sessionID string) ([]CommandRow, error)
	// CommandSession returns the id of the session that ran a command;
	// ErrNotFound if no such command was recorded.
	CommandSession(ctx context.Context, commandID string) (string, error)
	// OutputsRemoved records that the spool files of these commands were
	// deleted (their session's outputs passed limits.keptOutputBytes): the
	// rows keep their byte counts and name no file. Unknown IDs are skipped.
	OutputsRemoved(ctx context.Context, commandIDs []string) error

	// AddReplay records where a session's recording is, under the hash of
	// its monitoring key.
	AddReplay(ctx context.Context, sessionID string, keyHash []byte, recordingPath string) error
	// FindReplay finds it again by that hash; ErrNotFound if none.
	FindReplay(ctx context.Context, keyHash []byte) (Replay, error)
	// ReplayOf finds a session's recording by the session's id, for the
	// signed-in operator, who has no monitoring key of a session an earlier
	// process ran; ErrNotFound if none.
	ReplayOf(ctx context.Context, sessionID string) (Replay, error)
	// RecordedSessions lists the ended sessions that have a recording, most
	// recently ended first, at most limit of them (1 to
	// MaxRecordedSessions): the dashboard lists those of every process that
	// used this store, not only its own.
	RecordedSessions(ctx context.Context, limit int) ([]RecordedSession, error)

	// AppendAudit appends one audit record atomically across processes: it
	// takes the write lock, reads the head of the log, calls build with it,
	// inserts what build returns and commits. It returns after the commit,
	// with the record as stored. The record's Seq must be head.Seq+1.
	AppendAudit(ctx context.Context, build func(head AuditHead) (AuditRecord, error)) (AuditRecord, error)
	// ScanAudit calls fn on every audit record in seq order, from one
	// consistent snapshot. An error from fn stops the scan and is returned
	// as is.
	ScanAudit(ctx context.Context, fn func(AuditRecord) error) error
	// TailAudit returns the last n audit records that pass f, oldest first.
	TailAudit(ctx context.Context, n int, f AuditFilter) ([]AuditRecord, error)
	// Writable takes the lock AppendAudit takes and gives it back, waiting
	// no longer than ctx allows, so a caller learns whether an append would
	// get through now.
	Writable(ctx context.Context) error

	// Revoke records that the token jti is revoked. expires is when the
	// token would have expired anyway: the entry is kept until then, and
	// not after. Revoking a jti twice keeps the first entry; an empty jti
	// is an error.
	Revoke(ctx context.Context, jti string, expires time.Time) error
	// RevokedJTIs returns the revoked token ids that have not expired yet.
	RevokedJTIs(ctx context.Context) ([]string, error)

	// AddApproval records a pending approval.
	AddApproval(ctx context.Context, r ApprovalRow) error
	// DecideApproval records the answer to a pending approval; an approval
	// no longer pending keeps its first answer.
	DecideApproval(ctx context.Context, id, status, by, reason string, at time.Time) error
	// PendingApprovals lists every process's pending approvals, oldest
	// first, so that any node's dashboard shows them all.
	PendingApprovals(ctx context.Context) ([]ApprovalRow, error)
	// DenyApprovalsOf denies a gone process's pending approvals, returning them.
	DenyApprovalsOf(ctx context.Context, instanceID, by, reason string, at time.Time) ([]ApprovalRow, error)

	// Close releases the database. Calls after Close fail with an error.
	Close() error
}

// Errors callers branch on.
var (
	// ErrNotFound means the instance or session named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInstanceEnded means the instance was declared dead and ended,
	// usually by a neighbour that found its heartbeat stale.
	ErrInstanceEnded = errors.New("instance already ended")
	// ErrSchemaTooNew means the database was written by a newer tandem.
	// Opening it anyway could corrupt what that version relies on.
	ErrSchemaTooNew = errors.New("database schema is newer than this tandem")
	// ErrUnavailable means the database cannot be reached or cannot serve
	// now: PostgreSQL is down or unreachable, or does not answer in time;
	// SQLite's file stays locked by another process, or cannot be opened.
	// Trying again later may succeed.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSharedUnavailable means the shared database that several nodes
	// use (PostgreSQL) cannot be reached or does not answer in time. It
	// always comes with ErrUnavailable; agents see it as store_unavailable.
	ErrSharedUnavailable = errors.New("shared store unavailable")
	// ErrNameTaken means another node already holds an active session of
	// that name for the same caller (tenant, actor and owner).
	ErrNameTaken = errors.New("an active session already has that name")
)

// SchemaError says which schema versions disagree when a database is newer
// than this binary. It matches ErrSchemaTooNew with errors.Is.
type SchemaError struct {
	Path  string // the database: a file, or a URL without its password
	Found int    // the database's schema version
	Known int    // the newest version this binary knows
	// Flag is the command-line flag that picks another database:
	// "--data-dir" when empty.
	Flag string
}

// Error says which versions disagree and what to do about it.
func (e *SchemaError) Error() string {
	flag := e.Flag
	if flag == "" {
		flag = "--data-dir"
	}
	return fmt.Sprintf("%s has schema version %d but this tandem knows only up to %d: upgrade tandem, or use another %s",
		e.Path, e.Found, e.Known, flag)
}

// Unwrap lets errors.Is match ErrSchemaTooNew.
func (e *SchemaError) Unwrap() error { return ErrSchemaTooNew }

// Instance is one tandem process using the data dir. Heartbeats tell the
// live ones from those that died without ending their sessions.
type Instance struct {
	ID        string
	PID       int
	Host      string
	StartedAt time.Time
	// URL is where the other nodes reach this process's internal API, to
	// forward calls for the sessions it holds; "" if it serves none.
	URL string
	// HeartbeatAt and EndedAt are filled in by reads; RegisterInstance
	// ignores them. EndedAt is zero while the instance lives.
	HeartbeatAt time.Time
	EndedAt     time.Time
}

// Session statuses.
const (
	StatusActive = "active"
	StatusEnded  = "ended"
)

// SessionRow is a session as the directory keeps it: enough to tell a
// caller after a restart that its session ended, and to account for it.
type SessionRow struct {
	ID         string
	Name       string
	Tenant     string
	Actor      string // the claim's actor that created it; "" over stdio
	Owner      string // the caller's connection (stdio) or the claim's sid, as "sid:…"
	InstanceID string // the process holding its shell
	Target     string
	Kind       string // "ssh" or "local"
	Host       string
	Port       int
	Username   string
	// TokenHash is the SHA-256 of the session token, 32 bytes; the token
	// itself is never stored.
	TokenHash []byte
	Status    string // StatusActive or StatusEnded
	CreatedAt time.Time
	EndedAt   time.Time // zero while active
	EndReason string
}

// Command sources.
const (
	SourceAgent = "agent"
	SourceUser  = "user"
)

// CommandRow is one command run in a session, by the agent or by the human.
// Its full output is in the spool files named here.
type CommandRow struct {
	ID          string
	SessionID   string
	Source      string // SourceAgent or SourceUser
	Command     string
	Cwd         string
	ExitCode    *int // nil when the command never finished
	StartedAt   time.Time
	DurationMs  int64
	StdoutBytes int64
	StderrBytes int64
	StdoutPath  string
	StderrPath  string
	// Connections are the network connections the command's programs
	// made, or were refused, through the egress proxy; nil when none.
	Connections []Connection
}

// Connection is one connection a command's programs asked tandem's egress
// proxy for, as the command's row keeps it.
type Connection struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	// Addr is the address connected to (or that would have been); empty
	// when the name did not resolve or was never looked up.
	Addr string `json:"addr,omitempty"`
	// Decision is allowed, approved, refused or denied.
	Decision  string `json:"decision"`
	BytesUp   int64  `json:"bytesUp"`
	BytesDown int64  `json:"bytesDown"`
	// DurationMs is how long it was open; for one still open when the row
	// was written, until then.
	DurationMs int64 `json:"durationMs"`
	// Method and Path are a request's, judged on an inspected connection
	// (network.credentials, or an allow entry's methods and paths).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Credential names the credentials the proxy added (never a value).
	Credential string `json:"credential,omitempty"`
}

// EncodeConnections is the text a backend stores for a row's connections:
// JSON, or "" for none.
func EncodeConnections(cs []Connection) (string, error) {
	if len(cs) == 0 {
		return "", nil
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return "", fmt.Errorf("encode connections: %w", err)
	}
	return string(b), nil
}

// DecodeConnections reads what EncodeConnections wrote.
func DecodeConnections(s string) ([]Connection, error) {
	if s == "" {
		return nil, nil
	}
	var cs []Connection
	if err := json.Unmarshal([]byte(s), &cs); err != nil {
		return nil, fmt.Errorf("decode connections: %w", err)
	}
	return cs, nil
}

// Replay locates a session's recording for the browser replay.
type Replay struct {
	SessionID     string
	Name          string
	Status        string // StatusActive or StatusEnded
	RecordingPath string
}

// RecordedSession is an ended session and where its recording is, as
// [Store.RecordedSessions] lists it.
type RecordedSession struct {
	Session       SessionRow
	RecordingPath string
}

// MaxRecordedSessions bounds one [Store.RecordedSessions] listing.
const MaxRecordedSessions = 1000

// CheckRecordedLimit is the error of a [Store.RecordedSessions] limit out of
// range, the same in every backend.
func CheckRecordedLimit(limit int) error {
	if limit < 1 || limit > MaxRecordedSessions {
		return fmt.Errorf("store recorded sessions: limit %d is not 1 to %d", limit, MaxRecordedSessions)
	}
	return nil
}

// AuditHead is the end of the audit chain: what a new record links to.
type AuditHead struct {
	Seq  int64  // 0 when the log is empty
	Hash string // "" when the log is empty
}

// AuditFilter narrows [Store.TailAudit]; empty fields match everything.
type AuditFilter struct {
	SessionName string
	Tenant      string
	// Before, if not 0, keeps records older than that seq: the next page
	// of a listing, newest first.
	Before int64
}

// AuditRecord is one entry of the hash-chained audit log. internal/audit
// defines what the fields mean and how Hash is computed (audit.Record is
// this type); the store keeps every field exactly as given, Args byte for
// byte, with Time in UTC.
type AuditRecord struct {
	Seq              int64           `json:"seq"`
	Time             time.Time       `json:"time"`
	Tenant           string          `json:"tenant,omitempty"`
	Actor            string          `json:"actor,omitempty"`
	ClaimFingerprint string          `json:"claimFingerprint,omitempty"`
	JTI              string          `json:"jti,omitempty"`
	SessionID        string          `json:"sessionId,omitempty"`
	SessionName      string          `json:"sessionName,omitempty"`
	Target           string          `json:"target,omitempty"`
	Tool             string          `json:"tool,omitempty"`
	Event            string          `json:"event"`
	Args             json.RawMessage `json:"args,omitempty"`
	Outcome          string          `json:"outcome,omitempty"`
	Reason           string          `json:"reason,omitempty"`
	ExitCode         *int            `json:"exitCode,omitempty"`
	DurationMs       int64           `json:"durationMs,omitempty"`
	Bytes            int64           `json:"bytes,omitempty"`
	ApprovalID       string          `json:"approvalId,omitempty"`
	// SID is the agent run of a claim (HTTP mode).
	SID string `json:"sid,omitempty"`
	// Workspace is the claim's workspace and the directory it resolved to.
	Workspace string `json:"workspace,omitempty"`
	// HashVersion is the hash encoding the record was written with: 1 for
	// records before sid and workspace existed, 2 since.
	HashVersion int    `json:"hashVersion"`
	PrevHash    string `json:"prevHash"`
	Hash        string `json:"hash"`
}

// ApprovalRow is one approval as the store keeps it.
type ApprovalRow struct {
	ID, InstanceID, Tenant, Actor, SessionID, SessionName, Target, Tool, Command, Cwd, Fingerprint, Rule string
	Status, DecidedBy, DecisionReason                                                                    string
	CreatedAt, ExpiresAt                                                                                 time.Time
	DecidedAt                                                                                            *time.Time
}

// CorruptRecordError reports an audit row that cannot be read back as
// tandem wrote it, such as a time edited into another spelling.
type CorruptRecordError struct {
	Seq int64
	Err error
}

// Error names the record and what is wrong with it.
func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("audit record %d is unreadable: %v", e.Seq, e.Err)
}

// Unwrap returns the underlying parse error.
func (e *CorruptRecordError) Unwrap() error { return e.Err }
