package claim_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tandem-sh/tandem/internal/claim"
)

func TestIssueVerifyRoundTrip(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	iss, v, _ := own(t, clk)
	tok, issued, err := iss.Issue(claim.IssueParams{
		Tenant: "acme", Actor: "agent-7", Workspace: "ws1", Tools: []string{"ssh_exec"}, TTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, issued) {
		t.Fatalf("verified %+v\nissued   %+v", got, issued)
	}
	want := claim.Claims{
		Issuer: ownName, Actor: "agent-7", Tenant: "acme", Workspace: "ws1", Tools: []string{"ssh_exec"},
		SID: got.JTI, JTI: got.JTI, Audience: []string{ownAud},
		IssuedAt: t0, NotBefore: t0, Expires: t0.Add(time.Hour), Fingerprint: got.Fingerprint,
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("claims %+v\nwant   %+v", *got, want)
	}
	if id, _ := base64.RawURLEncoding.DecodeString(got.JTI); len(id) != 16 {
		t.Errorf("jti %q is not 16 bytes of base64url", got.JTI)
	}

	// A second call is served from the cache and must give the same claims,
	// in a copy the caller may change freely.
	got.Tools[0] = "changed"
	again, err := v.Verify(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if again.Fingerprint != issued.Fingerprint || again.Tools[0] != "ssh_exec" {
		t.Fatalf("second verify: %+v", again)
	}

	other, _, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "agent-7", Workspace: "ws1", Tools: []string{"ssh_exec"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	oc, err := v.Verify(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if oc.Fingerprint == issued.Fingerprint {
		t.Fatal("two tokens with different jtis share a fingerprint")
	}
}

func TestIssueSIDAndOmittedClaims(t *testing.T) {
	clk := newClock(t0)
	iss, v, _ := own(t, clk)
	tok, c, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "a", SID: "run-1", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if c.SID != "run-1" || c.Workspace != "" || c.Tools != nil {
		t.Fatalf("claims %+v", c)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	for _, name := range []string{`"wsp"`, `"tools"`} {
		if strings.Contains(string(payload), name) {
			t.Errorf("payload %s has %s", payload, name)
		}
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}

func TestIssueRefusesBadParams(t *testing.T) {
	clk := newClock(t0)
	iss, _, _ := own(t, clk)
	for name, p := range map[string]claim.IssueParams{
		"no tenant": {Actor: "a", TTL: time.Hour},
		"no actor":  {Tenant: "t", TTL: time.Hour},
		"zero TTL":  {Tenant: "t", Actor: "a"},
		"short TTL": {Tenant: "t", Actor: "a", TTL: time.Millisecond},
		"negative":  {Tenant: "t", Actor: "a", TTL: -time.Hour},
	} {
		if _, _, err := iss.Issue(p); err == nil {
			t.Errorf("%s: issued", name)
		}
	}
	if _, _, err := (&claim.Issuer{Name: "x", Audience: "y"}).Issue(claim.IssueParams{Tenant: "t", Actor: "a", TTL: time.Hour}); err == nil {
		t.Error("issued without a key")
	}
}

func TestAllows(t *testing.T) {
	for _, tc := range []struct {
		tools []string
		tool  string
		want  bool
	}{
		{nil, "ssh_exec", true},
		{[]string{}, "ssh_exec", false},
		{[]string{"ssh_exec"}, "ssh_exec", true},
		{[]string{"ssh_exec"}, "ssh_open", false},
	} {
		if got := (&claim.Claims{Tools: tc.tools}).Allows(tc.tool); got != tc.want {
			t.Errorf("Tools %#v Allows(%q) = %v", tc.tools, tc.tool, got)
		}
	}
}

// TestFingerprintCanonical checks that the fingerprint is the SHA-256 of the
// payload with keys sorted and whitespace gone, numbers as written.
func TestFingerprintCanonical(t *testing.T) {
	clk := newClock(t0)
	_, v, key := own(t, clk)
	header := `{"alg":"EdDSA","typ":"JWT","kid":"` + kidOf(key) + `"}`
	loose := `{ "tnt": "acme", "sub": "a<b>", "exp": 1800003600, "iat": 1800000000,
		"jti": "j1", "aud": "` + ownAud + `", "iss": "tandem", "x": 1.50 }`
	canonical := `{"aud":"` + ownAud + `","exp":1800003600,"iat":1800000000,"iss":"tandem","jti":"j1","sub":"a<b>","tnt":"acme","x":1.50}`
	sum := sha256.Sum256([]byte(canonical))
	want := hex.EncodeToString(sum[:])
	for _, payload := range []string{loose, canonical} {
		c, err := v.Verify(context.Background(), signRaw(key, header, payload))
		if err != nil {
			t.Fatal(err)
		}
		if c.Fingerprint != want {
			t.Errorf("fingerprint of %s = %s; want %s", payload, c.Fingerprint, want)
		}
	}
}

func TestVerifyRefusals(t *testing.T) {
	clk := newClock(t0)
	_, v, key := own(t, clk)
	revoked := map[string]bool{"jti-revoked": true}
	v.Revoked = func(jti string) bool { return revoked[jti] }
	v.Exists = func(tenant, _ string) error {
		if tenant != "acme" {
			return errors.New("no such tenant")
		}
		return nil
	}
	kid := kidOf(key)
	with := func(change func(m jwt.MapClaims)) string {
		m := ownClaims(t0)
		change(m)
		return sign(t, jwt.SigningMethodEdDSA, key, kid, m)
	}
	valid := with(func(jwt.MapClaims) {})
	parts := strings.Split(valid, ".")
	b64 := base64.RawURLEncoding.EncodeToString

	_, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	pub := key.Public().(ed25519.PublicKey)
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	for _, tc := range []struct {
		name, reason, token string
	}{
		{"expired", "expired", with(func(m jwt.MapClaims) { m["iat"], m["exp"] = t0.Add(-time.Hour).Unix(), t0.Add(-time.Second).Unix() })},
		{"expires now", "expired", with(func(m jwt.MapClaims) { m["iat"], m["exp"] = t0.Add(-time.Hour).Unix(), t0.Unix() })},
		{"iat beyond skew", "not_yet_valid", with(func(m jwt.MapClaims) { m["iat"] = t0.Add(61 * time.Second).Unix() })},
		{"nbf in the future", "not_yet_valid", with(func(m jwt.MapClaims) { m["nbf"] = t0.Add(5 * time.Minute).Unix() })},
		{"ttl over max", "ttl_too_long", with(func(m jwt.MapClaims) { m["exp"] = t0.Add(24*time.Hour + time.Second).Unix() })},
		{"wrong audience", "audience", with(func(m jwt.MapClaims) { m["aud"] = "https://other.test/mcp" })},
		{"audience list without us", "audience", with(func(m jwt.MapClaims) { m["aud"] = []string{"a", "b"} })},
		{"aud missing", "audience", with(func(m jwt.MapClaims) { delete(m, "aud") })},
		{"aud a number", "audience", with(func(m jwt.MapClaims) { m["aud"] = 7 })},
		{"unknown issuer", "unknown_issuer", with(func(m jwt.MapClaims) { m["iss"] = "evil" })},
		{"no issuer", "unknown_issuer", with(func(m jwt.MapClaims) { delete(m, "iss") })},
		{"payload tampered", "signature", parts[0] + "." + b64([]byte(`{"iss":"tandem","sub":"root","aud":"`+ownAud+`","tnt":"acme","jti":"x","iat":1800000000,"exp":1800003600}`)) + "." + parts[2]},
		{"signature altered", "signature", parts[0] + "." + parts[1] + "." + b64(flip(parts[2]))},
		{"signature cut", "signature", parts[0] + "." + parts[1] + "." + parts[2][:40]},
		{"other key, its kid", "signature", sign(t, jwt.SigningMethodEdDSA, otherKey, kidOf(otherKey), ownClaims(t0))},
		{"other key, our kid", "signature", sign(t, jwt.SigningMethodEdDSA, otherKey, kid, ownClaims(t0))},
		{"other key, no kid", "signature", sign(t, jwt.SigningMethodEdDSA, otherKey, "", ownClaims(t0))},
		{"alg none", "algorithm", b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."},
		{"alg missing", "algorithm", b64([]byte(`{"typ":"JWT"}`)) + "." + parts[1] + "." + parts[2]},
		{"HS256 with public key bytes", "algorithm", sign(t, jwt.SigningMethodHS256, []byte(pub), kid, ownClaims(t0))},
		{"HS256 with public key PEM", "algorithm", sign(t, jwt.SigningMethodHS256, pubPEM, kid, ownClaims(t0))},
		{"ES256 from our issuer", "algorithm", sign(t, jwt.SigningMethodES256, ecKey, kid, ownClaims(t0))},
		{"revoked", "revoked", with(func(m jwt.MapClaims) { m["jti"] = "jti-revoked" })},
		{"unknown tenant", "unknown_tenant", with(func(m jwt.MapClaims) { m["tnt"] = "globex" })},
		{"jti missing", "claims", with(func(m jwt.MapClaims) { delete(m, "jti") })},
		{"jti empty", "claims", with(func(m jwt.MapClaims) { m["jti"] = "" })},
		{"exp missing", "claims", with(func(m jwt.MapClaims) { delete(m, "exp") })},
		{"exp a string", "claims", with(func(m jwt.MapClaims) { m["exp"] = "tomorrow" })},
		{"iat missing", "claims", with(func(m jwt.MapClaims) { delete(m, "iat") })},
		{"tenant missing", "claims", with(func(m jwt.MapClaims) { delete(m, "tnt") })},
		{"actor empty", "claims", with(func(m jwt.MapClaims) { m["sub"] = "" })},
		{"workspace a number", "claims", with(func(m jwt.MapClaims) { m["wsp"] = 3 })},
		{"tools a string", "claims", with(func(m jwt.MapClaims) { m["tools"] = "ssh_exec" })},
		{"tools null", "claims", with(func(m jwt.MapClaims) { m["tools"] = nil })},
		{"tools with a number", "claims", with(func(m jwt.MapClaims) { m["tools"] = []any{"ssh_exec", 1} })},
		{"crit header", "malformed", signRaw(key, `{"alg":"EdDSA","kid":"`+kid+`","crit":["exp"]}`, `{}`)},
		{"kid a number", "malformed", signRaw(key, `{"alg":"EdDSA","kid":7}`, `{"iss":"tandem"}`)},
		{"garbage", "malformed", "this is not a token"},
		{"empty", "malformed", ""},
		{"three dots", "malformed", "..."},
		{"two dots", "malformed", ".."},
		{"payload not JSON", "malformed", parts[0] + "." + b64([]byte("not json")) + "." + parts[2]},
		{"padded base64", "malformed", parts[0] + "=." + parts[1] + "." + parts[2]},
		{"oversized", "malformed", strings.Repeat("a", 20<<10) + "." + parts[1] + "." + parts[2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tc.token)
			wantRefusal(t, err, tc.reason, tc.token)
		})
	}

	// The boundaries that must still pass.
	for name, tok := range map[string]string{
		"valid": valid,
		"iat within skew": with(func(m jwt.MapClaims) {
			m["iat"], m["nbf"] = t0.Add(59*time.Second).Unix(), t0.Add(59*time.Second).Unix()
		}),
		"ttl exactly max":    with(func(m jwt.MapClaims) { m["exp"] = t0.Add(24 * time.Hour).Unix() }),
		"audience in a list": with(func(m jwt.MapClaims) { m["aud"] = []string{"other", ownAud} }),
		"no nbf, no kid":     sign(t, jwt.SigningMethodEdDSA, key, "", ownClaims(t0)),
		"empty tools":        with(func(m jwt.MapClaims) { m["tools"] = []string{} }),
		"fractional exp":     with(func(m jwt.MapClaims) { m["exp"] = float64(t0.Unix()) + 0.5 }),
	} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// flip decodes a base64url segment and changes its first byte.
func flip(seg string) []byte {
	b, _ := base64.RawURLEncoding.DecodeString(seg)
	b[0] ^= 1
	return b
}

// TestCachedTokenStillChecked checks that a token whose signature is
// cached is still refused once it expires, is revoked or loses its tenant.
func TestCachedTokenStillChecked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, reason string
		spoil        func(clk *clock, revoked, gone map[string]bool, c *claim.Claims)
	}{
		{"expires", "expired", func(clk *clock, _, _ map[string]bool, _ *claim.Claims) { clk.Advance(time.Hour) }},
		{"revoked", "revoked", func(_ *clock, revoked, _ map[string]bool, c *claim.Claims) { revoked[c.JTI] = true }},
		{"tenant removed", "unknown_tenant", func(_ *clock, _, gone map[string]bool, c *claim.Claims) { gone[c.Tenant] = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock(t0)
			iss, v, _ := own(t, clk)
			revoked, gone := map[string]bool{}, map[string]bool{}
			v.Revoked = func(jti string) bool { return revoked[jti] }
			v.Exists = func(tenant, _ string) error {
				if gone[tenant] {
					return errors.New("tenant removed")
				}
				return nil
			}
			tok, _, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "a", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			c, err := v.Verify(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Hour - time.Second)
			if _, err := v.Verify(ctx, tok); err != nil {
				t.Fatalf("cached verify a second before expiry: %v", err)
			}
			tc.spoil(clk, revoked, gone, c)
			_, err = v.Verify(ctx, tok)
			wantRefusal(t, err, tc.reason, tok)
		})
	}
}
