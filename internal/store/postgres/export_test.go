package postgres

import "time"

// SetOpTimeout changes how long db's calls without a deadline wait, so a
// test need not wait the full default.
func SetOpTimeout(db *DB, d time.Duration) { db.opTimeout = d }
