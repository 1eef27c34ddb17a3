package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The channels a change is announced on (PostgreSQL NOTIFY), delivered when
// its transaction commits. A notification is only a wake-up: the tables
// hold the truth, and a listener re-reads them.
const (
	// ChannelSessions carries a session id (or an instance id, when a
	// reaper ended all of one instance's sessions).
	ChannelSessions = "tandem_sessions"
	// ChannelApprovals carries an approval id (or an instance id).
	ChannelApprovals = "tandem_approvals"
	// ChannelRevoked carries a revoked token's jti.
	ChannelRevoked = "tandem_revoked"
)

// notify queues a notification in tx, sent when tx commits.
func notify(ctx context.Context, tx pgx.Tx, channel, payload string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, payload)
	return err
}

// Listen calls fn with each notification on ChannelSessions,
// ChannelApprovals and ChannelRevoked until ctx ends. It holds one
// connection of its own. When that connection breaks it reconnects,
// retrying every retry until PostgreSQL answers, and then calls fn once per
// channel with an empty payload: notifications sent meanwhile are lost, so
// the listener should re-read everything. fn runs on Listen's goroutine
// and must not block for long.
func (db *DB) Listen(ctx context.Context, retry time.Duration, fn func(channel, payload string)) {
	channels := []string{ChannelSessions, ChannelApprovals, ChannelRevoked}
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
		conn, err := db.pool.Acquire(ctx)
		if err != nil {
			continue
		}
		ok := true
		for _, ch := range channels {
			if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
				ok = false
				break
			}
		}
		if ok {
			if !first {
				for _, ch := range channels {
					fn(ch, "")
				}
			}
			for {
				n, err := conn.Conn().WaitForNotification(ctx)
				if err != nil {
					break
				}
				fn(n.Channel, n.Payload)
			}
		}
		// A connection that listened is not given back to the pool.
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		conn.Release()
	}
}
