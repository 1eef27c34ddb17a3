-- 0001: tandem's first schema. Times are TEXT in UTC, RFC 3339 with exactly
-- nine fractional digits ("2006-01-02T15:04:05.000000000Z"), so they sort and
-- compare as strings and read back to the nanosecond.

-- One row per tandem process that has opened this data dir. A process
-- heartbeats while it lives; a neighbour that finds the heartbeat stale ends
-- the process's sessions (server_restart) and then the instance.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    pid          INTEGER NOT NULL,
    host         TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    ended_at     TEXT
) STRICT;

CREATE INDEX instances_live ON instances (heartbeat_at) WHERE ended_at IS NULL;

-- The session directory. Only the SHA-256 of a session token is kept.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    tenant      TEXT NOT NULL,
    owner       TEXT NOT NULL,
    instance_id TEXT NOT NULL REFERENCES instances (id),
    target      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL,
    username    TEXT NOT NULL,
    token_hash  BLOB NOT NULL CHECK (length(token_hash) = 32),
    status      TEXT NOT NULL CHECK (status IN ('active', 'ended')),
    created_at  TEXT NOT NULL,
    ended_at    TEXT,
    end_reason  TEXT NOT NULL DEFAULT '',
    CHECK ((status = 'active') = (ended_at IS NULL))
) STRICT;

CREATE INDEX sessions_by_name ON sessions (tenant, name, status);
CREATE INDEX sessions_active_by_instance ON sessions (instance_id) WHERE status = 'active';

-- Every command run in a session, the agent's and the human's. The streams
-- themselves live in spool files; only their paths and sizes are here.
CREATE TABLE commands (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    source       TEXT NOT NULL CHECK (source IN ('agent', 'user')),
    command      TEXT NOT NULL,
    cwd          TEXT NOT NULL,
    exit_code    INTEGER,
    started_at   TEXT NOT NULL,
    duration_ms  INTEGER NOT NULL,
    stdout_bytes INTEGER NOT NULL,
    stderr_bytes INTEGER NOT NULL,
    stdout_path  TEXT NOT NULL,
    stderr_path  TEXT NOT NULL
) STRICT;

CREATE INDEX commands_by_session ON commands (session_id, started_at);

-- The audit log: append-only, hash-chained by internal/audit. seq is the
-- rowid and runs 1, 2, 3 ... without gaps; hash and prev_hash are lowercase
-- hex SHA-256. No foreign keys: a record must be writable for a session the
-- directory never saw (a refused token, say).
CREATE TABLE audit (
    seq               INTEGER PRIMARY KEY,
    time              TEXT NOT NULL,
    tenant            TEXT NOT NULL,
    actor             TEXT NOT NULL,
    claim_fingerprint TEXT NOT NULL,
    jti               TEXT NOT NULL,
    session_id        TEXT NOT NULL,
    session_name      TEXT NOT NULL,
    target            TEXT NOT NULL,
    tool              TEXT NOT NULL,
    event             TEXT NOT NULL,
    args              TEXT NOT NULL,
    outcome           TEXT NOT NULL,
    reason            TEXT NOT NULL,
    exit_code         INTEGER,
    duration_ms       INTEGER NOT NULL,
    bytes             INTEGER NOT NULL,
    approval_id       TEXT NOT NULL,
    prev_hash         TEXT NOT NULL,
    hash              TEXT NOT NULL
) STRICT;

CREATE INDEX audit_by_session ON audit (session_name, seq);

-- tandem never changes or removes a record. These triggers stop a bug from
-- doing it; they do not stop someone with the file, which is what the hash
-- chain is for.
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit records are append-only');
END;

CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
    SELECT RAISE(ABORT, 'audit records are append-only');
END;
