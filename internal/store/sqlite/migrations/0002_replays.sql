-- Replays: how a monitoring URL finds a session's recording once the
-- session has ended, even in a later process. Only the SHA-256 of the
-- capability key is kept.
CREATE TABLE replays (
    session_id       TEXT PRIMARY KEY REFERENCES sessions (id),
    monitor_key_hash BLOB NOT NULL UNIQUE CHECK (length(monitor_key_hash) = 32),
    recording_path   TEXT NOT NULL
) STRICT;
