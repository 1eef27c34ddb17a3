// Package store is tandem's durable state: the instances (processes) sharing
// a data dir, the session directory, every command's history, and the rows
// of the audit log. It owns the schema, its migrations and the transactions
// that keep several tandem processes on one data dir consistent. It knows
// rows and SQL only: nothing of shells, MCP, tokens in the clear, or how the
// audit chain is hashed (internal/audit owns that and imports this package
// for the row type; this package imports nothing of tandem's).
//
// # Backends
//
// Callers use the [Store] interface. [SQLite] is the embedded default: one
// file, tandem.db, in the data dir, in WAL mode. A PostgreSQL backend for
// several tandem nodes is meant to implement the same interface and pass the
// same tests.
//
// # Several processes, one file
//
// Every MCP client spawns its own tandem, so several processes write one
// database at once. Every write runs in a transaction that takes the write
// lock when it begins (BEGIN IMMEDIATE), so a read-then-write such as
// appending to the audit chain can never interleave with another process's.
// A writer waits up to 10 s for another process's write lock before it
// fails, and stops waiting as soon as its ctx is done.
//
// # Times
//
// Times are stored in UTC as RFC 3339 with nine fractional digits, so they
// sort as text and read back equal to the nanosecond. A zero time.Time is
// stored as NULL where the column allows it.
package store
