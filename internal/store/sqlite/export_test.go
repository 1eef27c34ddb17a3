package sqlite

import (
	"context"
	"fmt"
)

// LimitPages lets s's database grow by at most extra pages, as if the disk
// filled up: a write that needs another page fails with SQLITE_FULL.
// lift removes the limit again.
func LimitPages(ctx context.Context, s *DB, extra int) (lift func() error, err error) {
	// max_page_count is per connection: the single write connection.
	var n int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA page_count").Scan(&n); err != nil {
		return nil, err
	}
	if _, err := s.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", n+extra)); err != nil {
		return nil, err
	}
	return func() error {
		_, err := s.wdb.ExecContext(ctx, "PRAGMA max_page_count = 4294967294")
		return err
	}, nil
}
