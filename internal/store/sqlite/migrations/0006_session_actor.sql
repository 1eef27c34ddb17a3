-- 0006: the directory keys a session by tenant, actor and owner, as on
-- PostgreSQL (its 0003). Rows written before keep an empty actor.
ALTER TABLE sessions ADD COLUMN actor TEXT NOT NULL DEFAULT '';

CREATE INDEX sessions_active_by_caller ON sessions (tenant, actor, owner, name) WHERE status = 'active';
