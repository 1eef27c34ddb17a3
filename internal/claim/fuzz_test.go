package claim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/claim"
)

// FuzzVerify feeds arbitrary strings to Verify. It must never panic, never
// echo a token in an error, and never accept anything but the one token
// that was really signed: the parser decodes base64 strictly, so no other
// string carries the same signed bytes.
func FuzzVerify(f *testing.F) {
	clk := newClock(t0)
	iss, v, _ := own(f, clk)
	valid, _, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "a", Tools: []string{"x"}, TTL: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	for _, seed := range []string{
		valid,
		valid[:len(valid)-1],
		valid + "A",
		parts[0] + "." + parts[1] + ".",
		"eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + ".",
		parts[1] + "." + parts[0] + "." + parts[2],
		"", ".", "..", "...", "a.b.c",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		c, err := v.Verify(context.Background(), token)
		if err == nil {
			if token != valid {
				t.Fatalf("accepted a token that was never signed: %q", token)
			}
			if c.Tenant != "acme" {
				t.Fatalf("claims %+v", c)
			}
			return
		}
		if len(token) >= 32 && strings.Contains(err.Error(), token) {
			t.Fatalf("error echoes the token: %v", err)
		}
	})
}
