package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/instance"
	"github.com/tandem-sh/tandem/internal/journal"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// HeartbeatEvery is how often a live process says so in the store (the
// lock file is what proves it on this host; on a shared store, the
// heartbeat is what tells other nodes it lives).
const HeartbeatEvery = 5 * time.Second

// SharedLease is how stale a heartbeat must be, on a shared store, before
// other nodes take its instance for dead and end its sessions: three
// missed heartbeats.
const SharedLease = 3 * HeartbeatEvery

// durable is a serve process's durable record: store, audit log, journal
// and its instance registration.
type durable struct {
	st      store.Store
	audit   *audit.Log
	journal *journal.Journal
	inst    *instance.Instance
	// reapAlive, on a shared store, tells live nodes from lost ones for
	// the periodic reap; nil otherwise.
	reapAlive func(id string) (bool, error)
	stop      context.CancelFunc
	beating   chan struct{}
	// fenced is closed when the store says this instance was declared
	// dead: its neighbours ended its sessions, so it must end its shells.
	fenced chan struct{}
}

// OpenStore opens the store --store names: SQLite in the data dir when
// it is empty, PostgreSQL for a postgres:// or postgresql:// URL. shared
// says whether tandem processes of other data dirs (other nodes) may use
// it too.
func OpenStore(ctx context.Context, dataDir, storeURL string) (st store.Store, shared bool, err error) {
	switch kind, _ := storeKind(storeURL); kind {
	case "sqlite":
		db, err := sqlite.Open(ctx, dataDir)
		if err != nil {
			return nil, false, err
		}
		return db, false, nil
	case "postgres":
		db, err := postgres.Open(ctx, storeURL)
		if err != nil {
			return nil, false, err
		}
		return db, true, nil
	default:
		return nil, false, fmt.Errorf("--store %q: want postgres://… or postgresql://… (PostgreSQL), or no --store for SQLite in the data dir",
			postgres.Redact(storeURL))
	}
}

// storeKind names the backend --store picks ("sqlite", "postgres", or ""
// for neither) and whether other nodes may share it.
func storeKind(storeURL string) (string, bool) {
	scheme, _, _ := strings.Cut(storeURL, "://")
	switch {
	case storeURL == "":
		return "sqlite", false
	case strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"):
		return "postgres", true
	}
	return "", false
}

// openRecord opens the store, registers this process, and ends the
// sessions of tandem processes that died (server_restart).
func openRecord(ctx context.Context, dataDir, storeURL, nodeURL string, log *slog.Logger) (*durable, error) {
	st, shared, err := OpenStore(ctx, dataDir, storeURL)
	if err != nil {
		return nil, err
	}
	if shared {
		log.Info("sessions, approvals and the audit log are in PostgreSQL", "store", postgres.Redact(storeURL))
	}
	inst, err := instance.Acquire(dataDir)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	host, _ := os.Hostname()
	if err := st.RegisterInstance(ctx, store.Instance{ID: inst.ID, PID: os.Getpid(), Host: host, URL: nodeURL, StartedAt: time.Now()}); err != nil {
		_ = inst.Release()
		_ = st.Close()
		return nil, err
	}
	d := &durable{st: st, audit: audit.New(st), inst: inst, beating: make(chan struct{}), fenced: make(chan struct{})}
	d.journal = journal.New(st, d.audit, inst.ID, log)
	alive := func(id string) (bool, error) { return instance.Alive(dataDir, id) }
	if shared {
		alive = leaseAlive(ctx, st, dataDir)
		d.reapAlive = alive
	}
	n, err := d.journal.Recover(ctx, alive)
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

// leaseAlive tells live instances from dead ones on a shared store, where
// most instances are other nodes' and have no lock file in this data dir:
// an instance is alive while its lock here is held, or while it is not
// ended and its last heartbeat is younger than SharedLease. So a node never
// ends the sessions of a live neighbour on another machine, and ends a dead
// one's after the lease, whether it died or lost the database. Heartbeats
// carry their node's clock: nodes' clocks must agree to well within the
// lease (NTP does).
func leaseAlive(ctx context.Context, st store.Store, dataDir string) func(id string) (bool, error) {
	return func(id string) (bool, error) {
		if live, err := instance.Alive(dataDir, id); live || err != nil {
			return live, err
		}
		in, err := st.Instance(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return in.EndedAt.IsZero() && time.Since(in.HeartbeatAt) < SharedLease, nil
	}
}

func (d *durable) heartbeat(ctx context.Context, log *slog.Logger) {
	defer close(d.beating)
	t := time.NewTicker(HeartbeatEvery)
	defer t.Stop()
	// A node judges its neighbours only after a lease of its own
	// heartbeats: after an outage of the store every node's heartbeat is
	// stale, and the first back must not end the others' sessions.
	healthySince := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			err := d.st.Heartbeat(ctx, d.inst.ID, now)
			switch {
			case errors.Is(err, store.ErrInstanceEnded):
				log.Error("this node was declared lost: its heartbeat lapsed, and another node ended its sessions (node_lost); ending its shells and stopping. Restart it to serve again.")
				close(d.fenced)
				return
			case err != nil && !errors.Is(err, context.Canceled):
				log.Warn("heartbeat", "err", err)
				healthySince = time.Time{}
				continue
			case err != nil:
				continue
			case healthySince.IsZero():
				healthySince = now
			}
			if now.Sub(healthySince) < SharedLease {
				continue
			}
			// On a shared store, a node that runs on ends the sessions of
			// a node whose lease lapsed: their shells are gone with it.
			if d.reapAlive != nil {
				if n, err := d.journal.Reap(ctx, d.reapAlive, journal.EndNodeLost); err != nil && !errors.Is(err, context.Canceled) {
					log.Warn("reap lost nodes", "err", err)
				} else if n > 0 {
					log.Warn("ended the sessions of a lost node", "sessions", n, "reason", journal.EndNodeLost)
				}
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
