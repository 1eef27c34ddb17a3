package claim_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tandem-sh/tandem/internal/claim"
)

const idp = "https://idp.test"

// jwksServer serves a JWK Set that a test may change, and counts requests.
type jwksServer struct {
	*httptest.Server
	requests atomic.Int64

	mu   sync.Mutex
	keys []map[string]string
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

// add publishes pub under kid.
func (s *jwksServer) add(kid string, pub crypto.PublicKey) {
	b64 := base64.RawURLEncoding.EncodeToString
	k := map[string]string{"kid": kid, "use": "sig"}
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		pt, _ := pub.Bytes()
		k["kty"], k["crv"], k["alg"], k["x"], k["y"] = "EC", "P-256", "ES256", b64(pt[1:33]), b64(pt[33:])
	case *rsa.PublicKey:
		k["kty"], k["alg"], k["n"], k["e"] = "RSA", "RS256", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func rsaKey(t testing.TB, bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// idpClaims is a valid claim set from the external issuer, which keeps
// the tenant in "org" and the actor in "email".
func idpClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": idp, "sub": "ignored", "email": "dev@acme.test", "org": "acme", "aud": []string{ownAud},
		"jti": "idp-1", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "tools": []string{"ssh_exec"},
	}
}

func externalVerifier(clk *clock, ext claim.ExternalIssuer) *claim.Verifier {
	ext.Issuer, ext.Audience = idp, ownAud
	ext.Names = claim.ClaimNames{Tenant: "org", Actor: "email"}
	return &claim.Verifier{External: []claim.ExternalIssuer{ext}, Now: clk.Now}
}

func TestExternalJWKS(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	srv := newJWKSServer(t)
	ec, rs := ecKey(t), rsaKey(t, 2048)
	srv.add("ec1", &ec.PublicKey)
	srv.add("rsa1", &rs.PublicKey)
	v := externalVerifier(clk, claim.ExternalIssuer{JWKSURL: srv.URL})

	for name, tok := range map[string]string{
		"ES256": sign(t, jwt.SigningMethodES256, ec, "ec1", idpClaims(t0)),
		"RS256": sign(t, jwt.SigningMethodRS256, rs, "rsa1", idpClaims(t0)),
	} {
		c, err := v.Verify(ctx, tok)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.Issuer != idp || c.Tenant != "acme" || c.Actor != "dev@acme.test" || c.SID != "idp-1" || !c.Allows("ssh_exec") || c.Allows("ssh_open") {
			t.Fatalf("%s: claims %+v", name, c)
		}
	}
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d JWKS requests; want 1", n)
	}

	for _, tc := range []struct{ name, reason, token string }{
		{"kid of the other key", "signature", sign(t, jwt.SigningMethodES256, ec, "rsa1", idpClaims(t0))},
		{"RS256 under an EC kid", "signature", sign(t, jwt.SigningMethodRS256, rs, "ec1", idpClaims(t0))},
		{"our audience missing", "audience", sign(t, jwt.SigningMethodES256, ec, "ec1", func() jwt.MapClaims {
			m := idpClaims(t0)
			m["aud"] = "https://other.test/mcp"
			return m
		}())},
		{"default tenant name not mapped", "claims", sign(t, jwt.SigningMethodES256, ec, "ec1", func() jwt.MapClaims {
			m := idpClaims(t0)
			delete(m, "org")
			m["tnt"] = "acme"
			return m
		}())},
		{"claims to be tandem", "unknown_issuer", sign(t, jwt.SigningMethodES256, ec, "ec1", ownClaims(t0))},
	} {
		_, err := v.Verify(ctx, tc.token)
		wantRefusal(t, err, tc.reason, tc.token)
	}
}

func TestExternalKeyRotation(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	srv := newJWKSServer(t)
	k1, k2, k3 := ecKey(t), ecKey(t), ecKey(t)
	srv.add("k1", &k1.PublicKey)
	v := externalVerifier(clk, claim.ExternalIssuer{JWKSURL: srv.URL})

	if _, err := v.Verify(ctx, sign(t, jwt.SigningMethodES256, k1, "k1", idpClaims(t0))); err != nil {
		t.Fatal(err)
	}
	srv.add("k2", &k2.PublicKey)
	tok2 := sign(t, jwt.SigningMethodES256, k2, "k2", idpClaims(t0))

	// Within the refetch interval of the first fetch, an unknown kid does
	// not reach the issuer.
	_, err := v.Verify(ctx, tok2)
	wantRefusal(t, err, "signature", tok2)
	if n := srv.requests.Load(); n != 1 {
		t.Fatalf("%d JWKS requests; want 1", n)
	}

	clk.Advance(31 * time.Second)
	if _, err := v.Verify(ctx, tok2); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d JWKS requests after the unknown kid; want 2", n)
	}

	clk.Advance(time.Second)
	tok3 := sign(t, jwt.SigningMethodES256, k3, "k3", idpClaims(t0))
	_, err = v.Verify(ctx, tok3)
	wantRefusal(t, err, "signature", tok3)
	if n := srv.requests.Load(); n != 2 {
		t.Fatalf("%d JWKS requests after a second unknown kid; want still 2", n)
	}
}

func TestExternalJWKSUnavailable(t *testing.T) {
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(done) }) // runs first, so Close does not wait on the handler
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"keys":[`))
		_, _ = w.Write(make([]byte, 2<<20))
	}))
	t.Cleanup(huge.Close)

	ec := ecKey(t)
	tok := sign(t, jwt.SigningMethodES256, ec, "k1", idpClaims(t0))
	for name, url := range map[string]string{"hangs": hang.URL, "fails": failing.URL, "too big": huge.URL} {
		t.Run(name, func(t *testing.T) {
			v := externalVerifier(newClock(t0), claim.ExternalIssuer{JWKSURL: url})
			v.HTTPClient = &http.Client{Timeout: 200 * time.Millisecond}
			start := time.Now()
			_, err := v.Verify(context.Background(), tok)
			wantRefusal(t, err, "jwks_unavailable", tok)
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("took %v; want about the 200ms client timeout", d)
			}
		})
	}
}

func TestExternalFixedKeys(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	ec, rs := ecKey(t), rsaKey(t, 2048)
	edPub, ed, _ := ed25519.GenerateKey(rand.Reader)
	var keys []crypto.PublicKey
	for _, pub := range []crypto.PublicKey{&ec.PublicKey, &rs.PublicKey, edPub} {
		k, err := claim.ParsePublicKeyPEM(pemOf(t, pub))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	v := externalVerifier(clk, claim.ExternalIssuer{PublicKeys: keys})
	for name, tok := range map[string]string{
		"ES256 without kid":   sign(t, jwt.SigningMethodES256, ec, "", idpClaims(t0)),
		"RS256 with some kid": sign(t, jwt.SigningMethodRS256, rs, "whatever", idpClaims(t0)),
		"EdDSA without kid":   sign(t, jwt.SigningMethodEdDSA, ed, "", idpClaims(t0)),
	} {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	other := ecKey(t)
	tok := sign(t, jwt.SigningMethodES256, other, "", idpClaims(t0))
	_, err := v.Verify(ctx, tok)
	wantRefusal(t, err, "signature", tok)
}

// TestOwnJWKSConsumed checks that the JWKS tandem publishes verifies its
// own tokens when another verifier treats tandem as an external issuer.
func TestOwnJWKSConsumed(t *testing.T) {
	clk := newClock(t0)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	set, err := claim.JWKS(pub)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct{ Keys []map[string]string }
	if err := json.Unmarshal(set, &parsed); err != nil || len(parsed.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", set, err)
	}
	want := map[string]string{"kty": "OKP", "crv": "Ed25519", "x": base64.RawURLEncoding.EncodeToString(pub), "kid": claim.KeyID(pub), "alg": "EdDSA", "use": "sig"}
	for k, w := range want {
		if parsed.Keys[0][k] != w {
			t.Errorf("JWKS %s = %q; want %q", k, parsed.Keys[0][k], w)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	t.Cleanup(srv.Close)

	iss := &claim.Issuer{Key: priv, Name: idp, Audience: ownAud, Now: clk.Now}
	tok, _, err := iss.Issue(claim.IssueParams{Tenant: "acme", Actor: "a", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	v := &claim.Verifier{External: []claim.ExternalIssuer{{Issuer: idp, JWKSURL: srv.URL, Audience: ownAud}}, Now: clk.Now}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}

func TestParsePublicKeyPEMRefuses(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, data := range map[string][]byte{
		"RSA 1024":   pemOf(t, &rsaKey(t, 1024).PublicKey),
		"P-384":      pemOf(t, &p384.PublicKey),
		"not PEM":    []byte("hello"),
		"wrong type": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
	} {
		if _, err := claim.ParsePublicKeyPEM(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func pemOf(t testing.TB, pub crypto.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestJWKSRedirectNotFollowed: a JWKS endpoint that redirects elsewhere
// gets no key trusted: the key behind the redirect (another server's, of
// the attacker's choosing) never verifies a token, with the default client
// or one the caller gives.
func TestJWKSRedirectNotFollowed(t *testing.T) {
	ctx := context.Background()
	evil := newJWKSServer(t)
	k := ecKey(t)
	evil.add("k1", &k.PublicKey)
	for _, code := range []int{http.StatusFound, http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, evil.URL+"/jwks.json", code)
		}))
		t.Cleanup(redirect.Close)
		for name, client := range map[string]*http.Client{"default client": nil, "caller's client": {Timeout: 5 * time.Second}} {
			t.Run(fmt.Sprintf("%d %s", code, name), func(t *testing.T) {
				before := evil.requests.Load()
				v := externalVerifier(newClock(t0), claim.ExternalIssuer{JWKSURL: redirect.URL})
				v.HTTPClient = client
				tok := sign(t, jwt.SigningMethodES256, k, "k1", idpClaims(t0))
				_, err := v.Verify(ctx, tok)
				wantRefusal(t, err, "jwks_unavailable", tok)
				if n := evil.requests.Load() - before; n != 0 {
					t.Fatalf("the redirect's target was fetched %d times; want never", n)
				}
			})
		}
	}
}
