package postgres

import "context"

// OutputsRemoved implements [store.Store].
func (db *DB) OutputsRemoved(ctx context.Context, commandIDs []string) error {
	if len(commandIDs) == 0 {
		return nil
	}
	return db.run(ctx, "store outputs removed", func(ctx context.Context) error {
		_, err := db.pool.Exec(ctx, `UPDATE commands SET stdout_path = '', stderr_path = '' WHERE id = ANY($1)`, commandIDs)
		return err
	})
}
