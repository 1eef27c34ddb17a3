package sqlite

import (
	"context"
	"database/sql"
)

// OutputsRemoved implements [store.Store].
func (s *DB) OutputsRemoved(ctx context.Context, commandIDs []string) error {
	if len(commandIDs) == 0 {
		return nil
	}
	return s.write(ctx, "store outputs removed", func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `UPDATE commands SET stdout_path = '', stderr_path = '' WHERE id = ?`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range commandIDs {
			if _, err := st.ExecContext(ctx, id); err != nil {
				return err
			}
		}
		return nil
	})
}
