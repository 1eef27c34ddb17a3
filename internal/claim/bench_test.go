package claim_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/claim"
)

func benchToken(b *testing.B) (string, *claim.Verifier) {
	clk := newClock(t0)
	iss, v, _ := own(b, clk)
	v.Exists = func(string, string) error { return nil }
	v.Revoked = func(string) bool { return false }
	tok, _, err := iss.Issue(claim.IssueParams{
		Tenant: "acme", Actor: "agent-7", Workspace: "ws1", Tools: []string{"ssh_exec", "ssh_open"}, TTL: time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	return tok, v
}

// BenchmarkVerifyCached is the per-request cost once a token's signature
// has been checked: hash, cache hit, time, Exists and Revoked.
func BenchmarkVerifyCached(b *testing.B) {
	ctx := context.Background()
	tok, v := benchToken(b)
	if _, err := v.Verify(ctx, tok); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyUncached is a token's first verify: parse, signature,
// claims. Each round uses a fresh Verifier so the cache never answers.
func BenchmarkVerifyUncached(b *testing.B) {
	ctx := context.Background()
	tok, v0 := benchToken(b)
	for b.Loop() {
		v := &claim.Verifier{
			OwnName: v0.OwnName, OwnKeys: []ed25519.PublicKey{v0.OwnKeys[0]}, OwnAudience: v0.OwnAudience, Now: v0.Now,
		}
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
