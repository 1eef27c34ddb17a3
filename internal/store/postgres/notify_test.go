package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestNotifications: every change another node must learn of wakes a
// listener on another handle, after the change is committed.
func TestNotifications(t *testing.T) {
	url := testenv.Postgres(t)
	db, listener := open(t, url), open(t, url)
	// Cancelled before the handles close: Close waits for the listener's
	// connection.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	type note struct{ channel, payload string }
	got := make(chan note, 16)
	go listener.Listen(ctx, 50*time.Millisecond, func(ch, p string) { got <- note{ch, p} })
	// LISTEN runs on the listener's goroutine: wait until it is in place
	// by notifying until one arrives.
	now := time.Now()
	mustNil(t, db.RegisterInstance(ctx, store.Instance{ID: "i", StartedAt: now}))
	h := sha256.Sum256([]byte("tok"))
	row := store.SessionRow{ID: "s1", Name: "dev", Tenant: "t", Owner: "sid:a", InstanceID: "i", Target: "x", Kind: "local",
		TokenHash: h[:], CreatedAt: now}
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		mustNil(t, db.Revoke(ctx, "warmup-"+string(rune('a'+i%26))+time.Now().Format("150405.000000"), now.Add(time.Hour)))
		select {
		case n := <-got:
			if n.channel != postgres.ChannelRevoked {
				t.Fatalf("first note %+v; want a revocation", n)
			}
		case <-time.After(100 * time.Millisecond):
			continue
		case <-deadline:
			t.Fatal("the listener never heard a revocation")
		}
		break
	}
	drain := func() {
		for {
			select {
			case <-got:
			case <-time.After(200 * time.Millisecond):
				return
			}
		}
	}
	drain()
	for _, tc := range []struct {
		name    string
		do      func() error
		channel string
		payload string
	}{
		{"revoke", func() error { return db.Revoke(ctx, "jti-1", now.Add(time.Hour)) }, postgres.ChannelRevoked, "jti-1"},
		{"create session", func() error { return db.CreateSession(ctx, row) }, postgres.ChannelSessions, "s1"},
		{"end session", func() error { return db.EndSession(ctx, "s1", "disconnect", now) }, postgres.ChannelSessions, "s1"},
		{"add approval", func() error {
			return db.AddApproval(ctx, store.ApprovalRow{ID: "a1", InstanceID: "i", CreatedAt: now, ExpiresAt: now.Add(time.Minute)})
		}, postgres.ChannelApprovals, "a1"},
		{"decide approval", func() error { return db.DecideApproval(ctx, "a1", "approved", "op", "", now) }, postgres.ChannelApprovals, "a1"},
	} {
		mustNil(t, tc.do())
		select {
		case n := <-got:
			if n.channel != tc.channel || n.payload != tc.payload {
				t.Errorf("%s: heard %+v; want %s %s", tc.name, n, tc.channel, tc.payload)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: no notification within 5 s", tc.name)
		}
	}
	// Deciding again changes nothing, so nobody is woken.
	mustNil(t, db.DecideApproval(ctx, "a1", "denied", "late", "", now))
	select {
	case n := <-got:
		t.Errorf("a decision that changed nothing notified %+v", n)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestActiveNamesUnique: two nodes cannot both hold an active session of
// one caller's name; the second learns store.ErrNameTaken. Once the first
// ends, the name is free again.
func TestActiveNamesUnique(t *testing.T) {
	ctx := context.Background()
	db := open(t, testenv.Postgres(t))
	now := time.Now()
	for _, id := range []string{"a", "b"} {
		mustNil(t, db.RegisterInstance(ctx, store.Instance{ID: id, StartedAt: now}))
	}
	h := sha256.Sum256([]byte("tok"))
	row := func(id, inst, actor, owner string) store.SessionRow {
		return store.SessionRow{ID: id, Name: "dev", Tenant: "t", Actor: actor, Owner: owner, InstanceID: inst, Target: "x", Kind: "local",
			TokenHash: h[:], CreatedAt: now}
	}
	mustNil(t, db.CreateSession(ctx, row("s1", "a", "alice", "sid:1")))
	if err := db.CreateSession(ctx, row("s2", "b", "alice", "sid:1")); !errors.Is(err, store.ErrNameTaken) {
		t.Fatalf("second active dev of one caller: err = %v; want ErrNameTaken", err)
	}
	mustNil(t, db.CreateSession(ctx, row("s3", "b", "alice", "sid:2"))) // another caller's name
	mustNil(t, db.CreateSession(ctx, row("s5", "b", "bob", "sid:1")))   // another actor with the same sid
	mustNil(t, db.EndSession(ctx, "s1", "disconnect", now))
	mustNil(t, db.CreateSession(ctx, row("s4", "b", "alice", "sid:1")))
}
