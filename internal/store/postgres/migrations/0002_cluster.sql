-- 0002: nodes reach each other. An instance records the URL of its
-- internal API, where other nodes forward calls for the sessions it holds.
-- A caller's active session names are unique across every node, as they
-- are within one process.
ALTER TABLE instances ADD COLUMN url text NOT NULL DEFAULT '';

CREATE UNIQUE INDEX sessions_active_name ON sessions (tenant, owner, name) WHERE status = 'active';

CREATE INDEX approvals_pending ON approvals (created_at, id) WHERE status = 'pending';
