package claim_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tandem-sh/tandem/internal/claim"
)

const (
	ownName = "tandem"
	ownAud  = "https://tandem.test/mcp"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Unix(1_800_000_000, 0)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leaked(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked after all tests:\n%s", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leaked polls until no goroutine but the caller runs code of this package,
// and returns the stacks of any that remain.
func leaked(timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var out []string
		for i, g := range strings.Split(string(buf), "\n\n") {
			if i > 0 && strings.Contains(g, "tandem/internal/claim") {
				out = append(out, g)
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return strings.Join(out, "\n\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clock is a settable time source for the Now hooks.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// own returns an Issuer and a Verifier for tandem's own tokens, both on clk.
func own(t testing.TB, clk *clock) (*claim.Issuer, *claim.Verifier, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss := &claim.Issuer{Key: priv, Name: ownName, Audience: ownAud, Now: clk.Now}
	v := &claim.Verifier{OwnName: ownName, OwnKeys: []ed25519.PublicKey{pub}, OwnAudience: ownAud, Now: clk.Now}
	return iss, v, priv
}

// ownClaims is a valid claim set for tandem's own tokens at now.
func ownClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": ownName, "sub": "agent-7", "aud": ownAud, "tnt": "acme", "wsp": "ws1",
		"jti": "jti-1", "iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// sign signs claims with method and key, naming kid when it is not empty.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signRaw signs a payload given as JSON text, byte for byte, with EdDSA.
func signRaw(key ed25519.PrivateKey, header, payload string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	text := b64([]byte(header)) + "." + b64([]byte(payload))
	return text + "." + b64(ed25519.Sign(key, []byte(text)))
}

// kidOf is the kid tandem gives the public half of key.
func kidOf(key ed25519.PrivateKey) string {
	return claim.KeyID(key.Public().(ed25519.PublicKey))
}

// wantRefusal checks that err is a refusal for reason that does not echo
// the token.
func wantRefusal(t *testing.T, err error, reason, token string) {
	t.Helper()
	var ce *claim.Error
	switch {
	case err == nil:
		t.Fatalf("accepted; want refusal %q", reason)
	case !errors.Is(err, claim.ErrInvalid):
		t.Fatalf("error %v does not match ErrInvalid", err)
	case !errors.As(err, &ce):
		t.Fatalf("error %v is not a *claim.Error", err)
	case ce.Reason != reason:
		t.Fatalf("reason %q (%v); want %q", ce.Reason, err, reason)
	case len(token) > 8 && strings.Contains(err.Error(), token):
		t.Fatalf("error text contains the token: %v", err)
	}
}
