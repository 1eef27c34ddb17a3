package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// Record is one audit record. It is the store's row type, so a backend
// persists it without a conversion; this package gives the fields their
// meaning:
//
//   - Seq, PrevHash and Hash are set by [Log.Append]; values passed in are
//     ignored.
//   - Time is when it happened; zero means now. It is kept in UTC.
//   - Tenant, Actor, ClaimFingerprint and JTI identify the caller. Over
//     stdio the actor is the connection and the claim fields are empty
//     until claims exist.
//   - Event is one of the Event constants; Tool is the MCP tool for
//     EventToolCall.
//   - Args are the tool's arguments as JSON; Append redacts them again
//     (see [Redact]) whatever the caller did.
//   - Outcome is "ok" or the stable error code; Reason explains lifecycle
//     events (an end reason, say).
type Record = store.AuditRecord

// Events, one per kind of thing the log records.
const (
	EventToolCall      = "tool_call"
	EventSessionStart  = "session_start"
	EventSessionEnd    = "session_end"
	EventGateTripped   = "gate_tripped"
	EventLeaseExpired  = "lease_expired"
	EventTokenRefused  = "token_refused"
	EventServerRestart = "server_restart"
	EventApprovalAsked = "approval_asked"
	EventApprovalDone  = "approval_decided"
	// EventNetwork is one decision of the egress proxy: a session's
	// connection allowed, refused, approved or denied (the Outcome); Args
	// hold host, port and address.
	EventNetwork = "network"
	// EventTypingLink is a typing link the operator made for a session:
	// whoever opens it may type there.
	EventTypingLink = "typing_link"
	// EventCommandTouched is a human's keys or interrupt key in the
	// agent's running command, recorded when the agent is told of it;
	// Args hold the command's id, the key count and the interrupt key.
	EventCommandTouched = "command_touched"
	// EventPortClosed is the end of a forwarded port (ssh_forward_port
	// opened it): Reason says why (session_ended, shutdown); Args hold
	// the port.
	EventPortClosed = "port_closed"
	// EventUserFile is a file a viewer uploaded or downloaded on the
	// monitoring page, or a transfer refused; Args hold the path, the
	// direction, and for a transfer its size and SHA-256, never content.
	EventUserFile = "user_file"
)

// OutcomeOK is the Outcome of a call that succeeded.
const OutcomeOK = "ok"

// Reader is the part of a store that [Verify] needs.
type Reader interface {
	// ScanAudit calls fn on every record in seq order and returns fn's
	// error unchanged.
	ScanAudit(ctx context.Context, fn func(Record) error) error
}

// AuditStore is what a [Log] needs from a store; every store.Store has it.
type AuditStore interface {
	Reader
	// AppendAudit runs build with the current head and inserts its result,
	// atomically across processes, returning after the commit.
	AppendAudit(ctx context.Context, build func(head store.AuditHead) (Record, error)) (Record, error)
	// Writable takes and releases the write lock, waiting no longer than
	// ctx allows: it tells whether an append would get through now.
	Writable(ctx context.Context) error
}

// Log appends records to the chain. It is safe for concurrent use, and
// several processes may each have one on the same store.
type Log struct {
	st AuditStore
}

// New returns a Log writing to st.
func New(st AuditStore) *Log { return &Log{st: st} }

// Ready reports whether a record could be appended now, waiting for the
// store's write lock no longer than ctx allows. A caller that must not act
// unrecorded checks it before acting.
func (l *Log) Ready(ctx context.Context) error {
	if err := l.st.Writable(ctx); err != nil {
		return fmt.Errorf("audit log not writable: %w", err)
	}
	return nil
}

// Append redacts r's Args, links r to the head of the chain, and stores it
// in one transaction. It returns the record as stored (with Seq, PrevHash
// and Hash) only once it is committed, so a caller replies after Append
// returns; on an error the call must not be treated as recorded.
func (l *Log) Append(ctx context.Context, r Record) (Record, error) {
	if r.Event == "" {
		return Record{}, errors.New("audit append: record has no event")
	}
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC()
	if y := r.Time.Year(); y < 1 || y > 9999 {
		return Record{}, fmt.Errorf("audit append: time %v is outside years 1-9999", r.Time)
	}
	r.Args = Redact(r.Args)
	rec, err := l.st.AppendAudit(ctx, func(head store.AuditHead) (Record, error) {
		next := r
		next.Seq = head.Seq + 1
		next.PrevHash = head.Hash
		if head.Seq == 0 {
			next.PrevHash = GenesisHash
		}
		next.HashVersion = HashVersion
		next.Hash = Hash(next)
		return next, nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("audit append %s: %w", r.Event, err)
	}
	return rec, nil
}
