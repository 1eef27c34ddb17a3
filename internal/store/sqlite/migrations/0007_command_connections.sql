-- 0007: a command's row lists the network connections its programs made
-- through the egress proxy (JSON, [] when none), as on PostgreSQL (its 0004).
ALTER TABLE commands ADD COLUMN connections TEXT NOT NULL DEFAULT '';
