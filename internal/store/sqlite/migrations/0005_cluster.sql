-- 0005: the instance's internal URL, as on PostgreSQL (used there by nodes
-- forwarding calls to each other; one machine's processes leave it empty).
ALTER TABLE instances ADD COLUMN url TEXT NOT NULL DEFAULT '';
