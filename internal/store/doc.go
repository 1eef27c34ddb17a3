// Package store is tandem's durable state as the rest of tandem sees it:
// the [Store] interface, the rows it reads and writes, and the errors
// callers branch on. It holds the instances (processes) sharing a
// database, the session directory, every command's history, replays,
// revoked tokens, approvals and the rows of the audit log. It knows rows
// only: nothing of shells, MCP, tokens in the clear, or how the audit chain
// is hashed (internal/audit owns that and imports this package for the row
// type; this package imports nothing of tandem's).
//
// # Backends
//
// The backends live in subpackages and own their schema, migrations and
// transactions:
//
//   - store/sqlite is the embedded default: one WAL-mode file, tandem.db,
//     in the data dir, shared by every tandem process on that dir.
//   - store/postgres is for several tandem nodes sharing one view
//     (tandem serve --store postgres://…).
//
// Both pass the same conformance suite, store/storetest, which is the
// executable form of the semantics documented on [Store].
package store
