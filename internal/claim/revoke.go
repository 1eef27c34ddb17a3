package claim

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// RevocationSource lists the revoked token ids, typically from the database
// that every tandem process sharing a state directory writes revocations to.
type RevocationSource interface {
	RevokedJTIs(ctx context.Context) ([]string, error)
}

// Revocations is an in-memory set of revoked jtis kept fresh from a Source,
// so a revocation made by another process takes effect within a second
// without a database read per call. Its Revoked method is meant for
// [Verifier.Revoked]. Nothing is revoked before the first successful
// Refresh: call Refresh at startup and treat its error as fatal.
type Revocations struct {
	Source   RevocationSource
	Interval time.Duration // between refreshes in Run; zero means 250ms
	Logger   *slog.Logger  // nil discards

	set atomic.Pointer[map[string]struct{}]
}

// Refresh loads the revoked set from the Source now. On error the set
// already held is kept.
func (r *Revocations) Refresh(ctx context.Context) error {
	jtis, err := r.Source.RevokedJTIs(ctx)
	if err != nil {
		return fmt.Errorf("claim: refresh revocations: %w", err)
	}
	set := make(map[string]struct{}, len(jtis))
	for _, j := range jtis {
		set[j] = struct{}{}
	}
	r.set.Store(&set)
	return nil
}

// Run refreshes the set every Interval until ctx ends. A failed refresh
// keeps the last set and is logged when refreshing starts failing, at most
// once a minute while it goes on, and when it recovers.
func (r *Revocations) Run(ctx context.Context) {
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTicker(orDefault(r.Interval, 250*time.Millisecond))
	defer t.Stop()
	var failingSince, lastLog time.Time
	for {
		err := r.Refresh(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && (failingSince.IsZero() || time.Since(lastLog) >= time.Minute):
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			lastLog = time.Now()
			log.Warn("revocation refresh failed; keeping the last set", "err", err, "failing_for", time.Since(failingSince).Round(time.Second))
		case err == nil && !failingSince.IsZero():
			log.Info("revocation refresh recovered", "failed_for", time.Since(failingSince).Round(time.Second))
			failingSince = time.Time{}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Revoked reports whether jti is in the set. It is safe for concurrent use
// and takes no lock.
func (r *Revocations) Revoked(jti string) bool {
	set := r.set.Load()
	if set == nil {
		return false
	}
	_, ok := (*set)[jti]
	return ok
}
