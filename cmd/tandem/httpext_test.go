package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// TestHTTPExternalIssuer: an identity provider on loopback serves its JWKS;
// ES256 and RS256 tokens it signs, with its own claim names, work end to
// end, and a key it never published does not.
func TestHTTPExternalIssuer(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks := map[string]any{"keys": []map[string]any{
		{"kty": "EC", "crv": "P-256", "kid": "ec1", "alg": "ES256", "use": "sig",
			"x": b64(ec.X.FillBytes(make([]byte, 32))), "y": b64(ec.Y.FillBytes(make([]byte, 32)))},
		{"kty": "RSA", "kid": "rsa1", "alg": "RS256", "use": "sig",
			"n": b64(rk.N.Bytes()), "e": b64(big.NewInt(int64(rk.E)).Bytes())},
	}}
	idp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(jwks)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	idp.Listener = ln
	idp.Start()
	t.Cleanup(idp.Close)

	w := newTwoTenants(t, fmt.Sprintf(`auth:
  issuers:
    - issuer: https://idp.example
      jwksUrl: %s/jwks
      audience: https://tandem.example/mcp
      claims: {tenant: org, actor: email}
`, idp.URL))
	s := startHTTP(t, httpOpts{config: w.yaml})
	sign := func(m jwt.SigningMethod, kid string, key any, aud string) string {
		tk := jwt.NewWithClaims(m, jwt.MapClaims{
			"iss": "https://idp.example", "aud": aud, "email": "carol@example.com", "org": "beta",
			"jti": kid + "-" + aud, "iat": time.Now().Unix(), "exp": time.Now().Add(10 * time.Minute).Unix(),
		})
		tk.Header["kid"] = kid
		tok, err := tk.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tc := range []struct {
		name string
		m    jwt.SigningMethod
		kid  string
		key  any
	}{{"ES256", jwt.SigningMethodES256, "ec1", ec}, {"RS256", jwt.SigningMethodRS256, "rsa1", rk}} {
		t.Run(tc.name, func(t *testing.T) {
			c := s.client(t, sign(tc.m, tc.kid, tc.key, "https://tandem.example/mcp"))
			r := mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "ext-" + tc.name}))
			sess := mcptest.Session{Name: "ext-" + tc.name, Token: str(r["sessionToken"])}
			if out := result(t, c.Call(t, "ssh_exec", execArgs(sess, "pwd"))); out["stdout"] != w.betaBuild+"\n" {
				t.Errorf("pwd = %v, want beta's workspace", out["stdout"])
			}
			// The same key, minted for another server.
			if resp, _ := s.post(t, "Bearer "+sign(tc.m, tc.kid, tc.key, "https://other.example/mcp")); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a token for another audience: %d", resp.StatusCode)
			}
		})
	}
	var found bool
	for _, r := range auditJSON(t, s.dataDir, "--tenant", "beta") {
		if r.Tool == "ssh_exec" && r.Actor == "carol@example.com" && len(r.ClaimFingerprint) == 64 {
			found = true
		}
	}
	if !found {
		t.Error("no audited exec by the external actor with a claim fingerprint")
	}
	// A key the provider never published, under a kid it did.
	rogue, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if resp, _ := s.post(t, "Bearer "+sign(jwt.SigningMethodES256, "ec1", rogue, "https://tandem.example/mcp")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token signed by an unpublished key: %d", resp.StatusCode)
	}
}
