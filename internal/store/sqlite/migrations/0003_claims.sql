-- 0003: HTTP mode's identity. Audit records name the claim's agent run
-- (sid) and workspace; hash_version says which hash encoding covers the
-- record (1: before these columns, 2: since). Revoked token ids are shared
-- by every process of the data dir until the token would have expired.
ALTER TABLE audit ADD COLUMN sid TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN hash_version INTEGER NOT NULL DEFAULT 1;

CREATE TABLE revoked_tokens (
    jti        TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL,
    revoked_at TEXT NOT NULL
) STRICT;
