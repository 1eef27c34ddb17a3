-- 0004: a command's row lists the network connections its programs made
-- through the egress proxy (JSON, empty when none), as on SQLite (its 0007).
ALTER TABLE commands ADD COLUMN connections text NOT NULL DEFAULT '';
