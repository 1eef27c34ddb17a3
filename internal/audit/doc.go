// Package audit is tandem's tamper-evident record of what happened: one
// [Record] per tool call and per lifecycle event, appended to a hash chain
// that [Verify] can check end to end. It owns the chain (sequence numbers,
// links, the hash encoding), the event names, and the redaction that keeps
// secrets off disk. It must not know SQL, MCP, shells or sessions beyond
// their names: records arrive already described, and persistence goes
// through the small [AuditStore] interface.
//
// Dependencies run one way: audit imports internal/store for its row type
// ([Record] is an alias of store.AuditRecord) and store imports nothing of
// audit. So a store backend persists records without knowing how they are
// hashed, and audit hashes them without knowing how they are stored.
//
// # The chain
//
// Records are numbered 1, 2, 3 ... without gaps. Each holds PrevHash, the
// Hash of the record before it ([GenesisHash], 64 zeros, for record 1), and
// its own Hash. [Log.Append] reads the head and inserts the next record in
// one cross-process write transaction and returns only after it commits, so
// a caller that replies after Append never acknowledges an unrecorded call.
//
// # Hash encoding (versions 1 and 2)
//
// Hash is the lowercase hex SHA-256 of this byte string, for the record's
// HashVersion (new records are version 2; version 1 records, written before
// HTTP mode's identity fields existed, still verify):
//
//	"tandem-audit-v1\n" or "tandem-audit-v2\n"
//	str(PrevHash)
//	int(Seq)
//	str(Time in UTC, formatted with time.RFC3339Nano)
//	str(Tenant) str(Actor) str(ClaimFingerprint) str(JTI)
//	str(SessionID) str(SessionName) str(Target) str(Tool) str(Event)
//	str(Args)
//	str(Outcome) str(Reason)
//	opt(ExitCode)
//	int(DurationMs) int(Bytes)
//	str(ApprovalID)
//	str(SID) str(Workspace)         (version 2 only)
//
// where str(s) is len(s) as a big-endian uint64 followed by the bytes of s
// exactly (Args: the stored JSON bytes, not a re-encoding), int(n) is n as a
// big-endian two's-complement int64, and opt(p) is the byte 0 when p is nil,
// or the byte 1 followed by int(*p). Every field but Hash is covered; the
// length prefixes make the encoding unambiguous, and no field is normalised
// (no UTF-8 repair, no JSON re-encoding), so any change to a stored byte
// changes the hash. Time is hashed at nanosecond precision in UTC, which is
// exactly what the store keeps and reads back.
//
// # What the chain proves, and what it does not
//
// Editing, deleting or inserting a record breaks the chain at that record,
// and Verify names it. Removing records from the end, or rewriting the whole
// chain from some record onwards, leaves a valid chain: detecting that needs
// the head (seq and hash) kept somewhere the writer cannot reach.
package audit
