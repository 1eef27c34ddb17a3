package claim_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/claim"
)

// TestJTINeverLooksLikeAFlag: `tandem token revoke JTI` takes the jti as
// an argument, and one that began with '-' was read as a flag (one token
// in 64 could not be revoked as the README shows).
func TestJTINeverLooksLikeAFlag(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &claim.Issuer{Key: key, Name: "tandem", Audience: "https://tandem.test/mcp"}
	seen := map[string]bool{}
	for range 2000 {
		_, c, err := is.Issue(claim.IssueParams{Tenant: "acme", Actor: "ci", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(c.JTI, "-") || len(c.JTI) != 22 || seen[c.JTI] {
			t.Fatalf("jti %q", c.JTI)
		}
		seen[c.JTI] = true
	}
}
