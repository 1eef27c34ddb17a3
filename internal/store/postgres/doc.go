// Package postgres is the shared [store.Store]: one PostgreSQL database
// that several tandem nodes use at once (tandem serve --store
// postgres://…), through a pgx connection pool. It owns the PostgreSQL
// schema and its migrations (migrations/*.sql, embedded), applied at Open
// under an advisory lock. It is written for PostgreSQL 12 and later and
// tested against Debian's (15).
//
// # One audit chain
//
// Every process on the database appends to one hash chain: an append takes
// a transaction-level advisory lock before it reads the head of the chain,
// and gives it back when it commits, so appends from any number of nodes
// are serialized into one chain with no gaps and no forks.
//
// # Failures
//
// A server that cannot be reached, or that breaks the connection, makes a
// call fail at once with an error matching [store.ErrUnavailable], naming
// the server; a call whose ctx has no deadline gives up after 10 s, with
// the same error, rather than hang. The pool recovers by itself: once the
// server is back, the next calls open fresh connections. Open reports an
// unreachable server within seconds (connect_timeout, 5 s unless the URL
// sets it).
//
// # Types
//
// Times are timestamptz, read back in UTC to the microsecond; an audit
// record keeps the nanoseconds below that in a column of their own, since
// its hash covers its time exactly. Hashes, keys and audit args are bytea,
// kept byte for byte. Text columns take valid UTF-8 without NUL bytes only.
// The tables live in the connection's search_path, so a schema may be
// chosen in the URL (?search_path=tandem).
package postgres
