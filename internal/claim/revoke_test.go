package claim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/claim"
)

// fakeSource is a RevocationSource whose list and failure a test sets.
type fakeSource struct {
	mu   sync.Mutex
	jtis []string
	err  error
}

func (s *fakeSource) RevokedJTIs(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.jtis...), s.err
}

func (s *fakeSource) set(err error, jtis ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jtis, s.err = jtis, err
}

func TestRevocationsRefresh(t *testing.T) {
	ctx := context.Background()
	src := &fakeSource{}
	r := &claim.Revocations{Source: src}
	if r.Revoked("a") {
		t.Fatal("revoked before any refresh")
	}
	src.set(nil, "a", "b")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !r.Revoked("a") || !r.Revoked("b") || r.Revoked("c") {
		t.Fatal("set does not match the source")
	}
	src.set(errors.New("database locked"), "c")
	if err := r.Refresh(ctx); err == nil {
		t.Fatal("refresh hid the source's error")
	}
	if !r.Revoked("a") || r.Revoked("c") {
		t.Fatal("a failed refresh changed the set")
	}
	src.set(nil, "c")
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Revoked("a") || !r.Revoked("c") {
		t.Fatal("set does not follow the source")
	}
}

func TestRevocationsRun(t *testing.T) {
	src := &fakeSource{}
	r := &claim.Revocations{Source: src}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	waitRevoked := func(jti string, want bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for r.Revoked(jti) != want {
			if time.Now().After(deadline) {
				t.Fatalf("Revoked(%q) is not %v within 1s", jti, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	src.set(nil, "jti-1")
	waitRevoked("jti-1", true)

	// A failing source keeps the last set; recovery picks up the new one.
	src.set(errors.New("database gone"))
	time.Sleep(300 * time.Millisecond)
	if !r.Revoked("jti-1") {
		t.Fatal("a failed refresh dropped the set")
	}
	src.set(nil, "jti-2")
	waitRevoked("jti-2", true)
	waitRevoked("jti-1", false)
}

// TestRevocationsWithVerifier wires Revocations into a Verifier, as the
// server does.
func TestRevocationsWithVerifier(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	iss, v, _ := own(t, clk)
	src := &fakeSource{}
	r := &claim.Revocations{Source: src}
	v.Revoked = r.Revoked
	tok, c, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	src.set(nil, c.JTI)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(ctx, tok)
	wantRefusal(t, err, "revoked", tok)
}
