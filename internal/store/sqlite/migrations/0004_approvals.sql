-- 0004: approvals. One row per pending approval a tandem process asked for;
-- a process that starts denies (server_restart) the pending approvals of
-- processes that are gone, as it ends their sessions.
CREATE TABLE approvals (
    id              TEXT PRIMARY KEY,
    instance_id     TEXT NOT NULL,
    tenant          TEXT NOT NULL,
    actor           TEXT NOT NULL,
    session_id      TEXT NOT NULL,
    session_name    TEXT NOT NULL,
    target          TEXT NOT NULL,
    tool            TEXT NOT NULL,
    command         TEXT NOT NULL,
    cwd             TEXT NOT NULL,
    fingerprint     TEXT NOT NULL,
    rule            TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
    decided_by      TEXT NOT NULL DEFAULT '',
    decision_reason TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    expires_at      TEXT NOT NULL,
    decided_at      TEXT
) STRICT;

CREATE INDEX approvals_pending_by_instance ON approvals (instance_id) WHERE status = 'pending';
