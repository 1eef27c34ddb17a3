// Package sqlite is the embedded [store.Store]: one file, tandem.db, in the
// data dir, in WAL mode, shared by every tandem process on that dir. It owns
// the SQLite schema and its migrations (migrations/*.sql, embedded).
//
// # Several processes, one file
//
// Every MCP client spawns its own tandem, so several processes write one
// database at once. Every write runs in a transaction that takes the write
// lock when it begins (BEGIN IMMEDIATE), so a read-then-write such as
// appending to the audit chain can never interleave with another process's.
// A writer waits up to 10 s for another process's write lock before it
// fails with [store.ErrUnavailable], and stops waiting as soon as its ctx
// is done.
//
// # Times
//
// Times are stored in UTC as RFC 3339 with nine fractional digits, so they
// sort as text and read back equal to the nanosecond. A zero time.Time is
// stored as NULL where the column allows it.
package sqlite
