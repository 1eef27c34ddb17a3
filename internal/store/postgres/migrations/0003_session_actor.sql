-- 0003: the directory keys a session by tenant, actor and owner (the
-- claim's sid), as each node's own registry does: two actors whose tokens
-- carry the same sid each have their own sessions, of any name, and
-- neither finds the other's. Rows written before keep an empty actor: a
-- node of this version does not route a call to them, and they end with
-- the process that holds them.
ALTER TABLE sessions ADD COLUMN actor text NOT NULL DEFAULT '';

DROP INDEX sessions_active_name;
CREATE UNIQUE INDEX sessions_active_name ON sessions (tenant, actor, owner, name) WHERE status = 'active';
