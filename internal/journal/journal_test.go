package journal_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/journal"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

func TestRecoverEndsOnlyDeadInstances(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now()
	for _, id := range []string{"self", "live", "dead"} {
		if err := st.RegisterInstance(ctx, store.Instance{ID: id, PID: 1, Host: "h", StartedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	for _, r := range []struct{ id, inst string }{{"s-self", "self"}, {"s-live", "live"}, {"s-dead1", "dead"}, {"s-dead2", "dead"}} {
		err := st.CreateSession(ctx, store.SessionRow{ID: r.id, Name: r.id, Tenant: "default", Owner: "c", InstanceID: r.inst,
			Target: "local", Kind: "local", Host: "localhost", Username: "u", TokenHash: hash("tok-" + r.id), CreatedAt: now})
		if err != nil {
			t.Fatal(err)
		}
	}
	log := audit.New(st)
	j := journal.New(st, log, "self", nil)
	t.Cleanup(j.Close)
	asked := map[string]int{}
	n, err := j.Recover(ctx, func(id string) (bool, error) { asked[id]++; return id == "live", nil })
	if err != nil || n != 2 {
		t.Fatalf("recover: %d, %v; want 2 sessions of the dead instance", n, err)
	}
	if asked["self"] != 0 || asked["dead"] != 1 || asked["live"] != 1 {
		t.Errorf("liveness asked %v: never self, once per other instance", asked)
	}
	active, _ := st.ActiveSessions(ctx)
	if len(active) != 2 {
		t.Errorf("active after recover: %+v", active)
	}
	var h [32]byte
	copy(h[:], hash("tok-s-dead1"))
	if reason, _, ok := j.Ended(ctx, "default", "s-dead1", h); !ok || reason != journal.EndServerRestart {
		t.Errorf("ended lookup: %q %v", reason, ok)
	}
	copy(h[:], hash("wrong"))
	if _, _, ok := j.Ended(ctx, "default", "s-dead1", h); ok {
		t.Error("a wrong token hash matched an ended session")
	}
	if n, err := audit.Verify(ctx, st); err != nil || n != 2 {
		t.Errorf("audit after recover: %d records, %v; want 2 server_restart records", n, err)
	}
}
