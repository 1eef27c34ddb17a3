-- 0001: tandem's PostgreSQL schema, the same tables as SQLite's migrations
-- 0001 to 0004. Times are timestamptz (microseconds); an audit record keeps
-- the nanoseconds below that in time_nanos, since its hash covers its time
-- exactly. Hashes and keys are bytea; audit args are bytea too, so they come
-- back byte for byte (jsonb would reorder keys and break the hash).

-- One row per tandem process (on any node) that has used this database. A
-- process heartbeats while it lives; a node that finds another's heartbeat
-- older than the lease ends that process's sessions (server_restart) and
-- then the instance.
CREATE TABLE instances (
    id           text PRIMARY KEY,
    pid          integer NOT NULL,
    host         text NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    ended_at     timestamptz
);

CREATE INDEX instances_live ON instances (heartbeat_at) WHERE ended_at IS NULL;

-- The session directory. Only the SHA-256 of a session token is kept.
CREATE TABLE sessions (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    tenant      text NOT NULL,
    owner       text NOT NULL,
    instance_id text NOT NULL REFERENCES instances (id),
    target      text NOT NULL,
    kind        text NOT NULL,
    host        text NOT NULL,
    port        integer NOT NULL,
    username    text NOT NULL,
    token_hash  bytea NOT NULL CHECK (length(token_hash) = 32),
    status      text NOT NULL CHECK (status IN ('active', 'ended')),
    created_at  timestamptz NOT NULL,
    ended_at    timestamptz,
    end_reason  text NOT NULL DEFAULT '',
    CHECK ((status = 'active') = (ended_at IS NULL))
);

CREATE INDEX sessions_by_name ON sessions (tenant, name, status);
CREATE INDEX sessions_active_by_instance ON sessions (instance_id) WHERE status = 'active';
CREATE INDEX sessions_active ON sessions (created_at, id) WHERE status = 'active';

-- Every command run in a session, the agent's and the human's. The streams
-- themselves live in spool files on the node that ran them. n keeps the
-- insertion order, for commands that started at the same instant.
CREATE TABLE commands (
    n            bigint GENERATED ALWAYS AS IDENTITY,
    id           text PRIMARY KEY,
    session_id   text NOT NULL REFERENCES sessions (id),
    source       text NOT NULL CHECK (source IN ('agent', 'user')),
    command      text NOT NULL,
    cwd          text NOT NULL,
    exit_code    integer,
    started_at   timestamptz NOT NULL,
    duration_ms  bigint NOT NULL,
    stdout_bytes bigint NOT NULL,
    stderr_bytes bigint NOT NULL,
    stdout_path  text NOT NULL,
    stderr_path  text NOT NULL
);

CREATE INDEX commands_by_session ON commands (session_id, started_at, n);

-- Replays: how a monitoring URL finds a session's recording once the
-- session has ended. Only the SHA-256 of the capability key is kept.
CREATE TABLE replays (
    session_id       text PRIMARY KEY REFERENCES sessions (id),
    monitor_key_hash bytea NOT NULL UNIQUE CHECK (length(monitor_key_hash) = 32),
    recording_path   text NOT NULL
);

-- The audit log: append-only, hash-chained by internal/audit. seq runs 1,
-- 2, 3 ... without gaps: appends take the advisory lock 0x74616e64656d0001
-- (pg_advisory_xact_lock) before reading the head, so every process on
-- this database extends one chain. hash and prev_hash are lowercase hex
-- SHA-256. No foreign keys: a record must be writable for a session the
-- directory never saw (a refused token, say).
CREATE TABLE audit (
    seq               bigint PRIMARY KEY CHECK (seq > 0),
    time              timestamptz NOT NULL,
    time_nanos        smallint NOT NULL CHECK (time_nanos BETWEEN 0 AND 999),
    tenant            text NOT NULL,
    actor             text NOT NULL,
    claim_fingerprint text NOT NULL,
    jti               text NOT NULL,
    session_id        text NOT NULL,
    session_name      text NOT NULL,
    target            text NOT NULL,
    tool              text NOT NULL,
    event             text NOT NULL,
    args              bytea NOT NULL,
    outcome           text NOT NULL,
    reason            text NOT NULL,
    exit_code         integer,
    duration_ms       bigint NOT NULL,
    bytes             bigint NOT NULL,
    approval_id       text NOT NULL,
    sid               text NOT NULL,
    workspace         text NOT NULL,
    hash_version      integer NOT NULL,
    prev_hash         text NOT NULL,
    hash              text NOT NULL
);

CREATE INDEX audit_by_session ON audit (session_name, seq);

-- tandem never changes or removes a record. These triggers stop a bug from
-- doing it; they do not stop the database's owner, which is what the hash
-- chain is for.
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only';
END
$$;

CREATE TRIGGER audit_no_update BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();

CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

-- Revoked token ids, shared by every node until the token would have
-- expired anyway.
CREATE TABLE revoked_tokens (
    jti        text PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL
);

-- Approvals. One row per pending approval a tandem process asked for; a
-- process that starts denies (server_restart) the pending approvals of
-- processes that are gone, as it ends their sessions.
CREATE TABLE approvals (
    id              text PRIMARY KEY,
    instance_id     text NOT NULL,
    tenant          text NOT NULL,
    actor           text NOT NULL,
    session_id      text NOT NULL,
    session_name    text NOT NULL,
    target          text NOT NULL,
    tool            text NOT NULL,
    command         text NOT NULL,
    cwd             text NOT NULL,
    fingerprint     text NOT NULL,
    rule            text NOT NULL,
    status          text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    decided_by      text NOT NULL DEFAULT '',
    decision_reason text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    decided_at      timestamptz
);

CREATE INDEX approvals_pending_by_instance ON approvals (instance_id) WHERE status = 'pending';
