package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/instance"
	"github.com/tandem-sh/tandem/internal/journal"
	"github.com/tandem-sh/tandem/internal/store"
)

// heartbeatEvery is how often a live process says so in the store (the
// lock file is what proves it on this host; the heartbeat is for people and
// for a shared store later).
const heartbeatEvery = 5 * time.Second

// durable is a serve process's durable record: store, audit log, journal
// and its instance registration.
type durable struct {
	st      *store.SQLite
	audit   *audit.Log
	journal *journal.Journal
	inst    *instance.Instance
	stop    context.CancelFunc
	beating chan struct{}
}

// openRecord opens the data dir's store, registers this process, and ends
// the sessions of tandem processes that died (server_restart).
func openRecord(ctx context.Context, dataDir string, log *slog.Logger) (*durable, error) {
	st, err := store.Open(ctx, dataDir)
	if err != nil {
		return nil, err
	}
	inst, err := instance.Acquire(dataDir)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	if err := st.RegisterInstance(ctx, store.Instance{ID: inst.ID, PID: os.Getpid(), Host: host, StartedAt: time.Now()}); err != nil {
		_ = inst.Release()
		_ = st.Close()
		return nil, err
	}
	d := &durable{st: st, audit: audit.New(st), inst: inst, beating: make(chan struct{})}
	d.journal = journal.New(st, d.audit, inst.ID, log)
	n, err := d.journal.Recover(ctx, func(id string) (bool, error) { return instance.Alive(dataDir, id) })
	if err != nil {
		d.close(log)
		return nil, fmt.Errorf("end the sessions of stopped tandem processes: %w", err)
	}
	if n > 0 {
		log.Info("ended sessions of tandem processes that are gone", "sessions", n, "reason", journal.EndServerRestart)
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	go d.heartbeat(hctx, log)
	return d, nil
}

func (d *durable) heartbeat(ctx context.Context, log *slog.Logger) {
	defer close(d.beating)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := d.st.Heartbeat(ctx, d.inst.ID, now); err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("heartbeat", "err", err)
			}
		}
	}
}

// close is called after every session has ended: it flushes the journal,
// marks the instance ended, and releases the store and the lock.
func (d *durable) close(log *slog.Logger) {
	if d.stop != nil {
		d.stop()
		<-d.beating
	}
	d.journal.Close()
	if err := d.st.EndInstance(context.Background(), d.inst.ID, time.Now()); err != nil {
		log.Warn("end instance", "err", err)
	}
	if err := errors.Join(d.st.Close(), d.inst.Release()); err != nil {
		log.Warn("close the store", "err", err)
	}
}
