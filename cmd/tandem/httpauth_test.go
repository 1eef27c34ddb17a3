package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tandem-sh/tandem/internal/claim"
)

// post sends one JSON-RPC tools/call to /mcp with the given Authorization
// header value ("" sends none).
func (s *httpServer) post(t testing.TB, authz string) (*http.Response, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_connect","arguments":{"name":"forged"}}}`
	req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHTTPRefusesBadClaims: replayed, forged and out-of-scope tokens get
// 401 with the RFC 9728 pointer, and nothing runs.
func TestHTTPRefusesBadClaims(t *testing.T) {
	w := newTwoTenants(t, "auth:\n  maxTTL: 1h\n")
	s := startHTTP(t, httpOpts{config: w.yaml})
	key, err := claim.LoadOrCreateKey(s.dataDir) // the server's own key, as the CLI finds it
	if err != nil {
		t.Fatal(err)
	}
	mint := func(iss, aud string, now time.Time, ttl time.Duration, p claim.IssueParams) string {
		t.Helper()
		i := &claim.Issuer{Key: key, Name: iss, Audience: aud, Now: func() time.Time { return now }}
		if p.Tenant == "" {
			p.Tenant, p.Actor = "acme", "mallory"
		}
		p.TTL = ttl
		tok, _, err := i.Issue(p)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	good := mint("tandem", "tandem", now, 30*time.Minute, claim.IssueParams{})
	if resp, body := s.post(t, "Bearer "+good); resp.StatusCode != http.StatusOK || !strings.Contains(body, `"success":false`) {
		// a valid token reaches the tool (which refuses the missing target name only)
		t.Fatalf("a valid token: %d %s", resp.StatusCode, body)
	}

	pub := key.Public().(ed25519.PublicKey)
	hs := func(secret []byte) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"iss": "tandem", "aud": "tandem", "sub": "mallory", "tnt": "acme", "jti": "hs",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(),
		}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	pemPub, err := exec.Command(binary, "token", "jwks", "--data-dir", s.dataDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	sig := []byte(parts[2])
	// One changed character in the middle of the signature, still
	// base64url (a flipped bit can leave the alphabet: that is malformed,
	// not a bad signature).
	if sig[len(sig)/2] == 'A' {
		sig[len(sig)/2] = 'B'
	} else {
		sig[len(sig)/2] = 'A'
	}
	badSig := parts[0] + "." + parts[1] + "." + string(sig)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(mustJSON(t, map[string]any{
		"iss": "tandem", "aud": "tandem", "sub": "mallory", "tnt": "beta", "jti": "x",
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})) + "." + parts[2]
	_, other, _ := ed25519.GenerateKey(nil)

	const (
		sigDesc    = "the token's signature does not verify with the issuer's keys"
		tenantDesc = "the token's tenant or workspace is not configured on this server"
	)
	// want is the RFC 6750 error_description; "" means no credentials were
	// sent, which gets no error code at all.
	cases := []struct{ name, authz, want string }{
		{"no token", "", ""},
		{"not bearer", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), ""},
		{"garbage", "Bearer not.a.jwt", "the token is malformed or lacks a required claim"},
		{"expired", "Bearer " + mint("tandem", "tandem", now.Add(-2*time.Hour), 30*time.Minute, claim.IssueParams{}), "the token expired; mint a new one (tandem token issue) and give it to the client"},
		{"wrong audience", "Bearer " + mint("tandem", "another-server", now, time.Minute, claim.IssueParams{}), "the token was minted for another audience than this server (auth.audience)"},
		{"unknown issuer", "Bearer " + mint("evil", "tandem", now, time.Minute, claim.IssueParams{}), "the token's issuer is not one this server accepts (auth.issuers)"},
		{"bad signature", "Bearer " + badSig, sigDesc},
		{"tampered payload", "Bearer " + tampered, sigDesc},
		{"another key", "Bearer " + mustSign(t, &claim.Issuer{Key: other, Name: "tandem", Audience: "tandem"}, claim.IssueParams{Tenant: "acme", Actor: "m", TTL: time.Minute}), sigDesc},
		{"alg none", "Bearer " + none, sigDesc},
		{"HS256 with the public key", "Bearer " + hs(pub), sigDesc},
		{"HS256 with the JWKS", "Bearer " + hs(pemPub), sigDesc},
		{"future iat", "Bearer " + mint("tandem", "tandem", now.Add(10*time.Minute), 30*time.Minute, claim.IssueParams{}), "the token is not valid yet; check the clocks of the issuer and this server"},
		{"unknown tenant", "Bearer " + mint("tandem", "tandem", now, time.Minute, claim.IssueParams{Tenant: "nope", Actor: "m"}), tenantDesc},
		{"unknown workspace", "Bearer " + mint("tandem", "tandem", now, time.Minute, claim.IssueParams{Tenant: "acme", Actor: "m", Workspace: "nope"}), tenantDesc},
		{"TTL over the maximum", "Bearer " + mint("tandem", "tandem", now, 2*time.Hour, claim.IssueParams{}), "the token lives longer than this server's auth.maxTTL allows"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.post(t, tc.authz)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.StatusCode, body)
			}
			h := resp.Header.Get("WWW-Authenticate")
			if !strings.Contains(h, `Bearer resource_metadata="`+s.base+`/.well-known/oauth-protected-resource"`) {
				t.Errorf("WWW-Authenticate = %q", h)
			}
			checkBearerError(t, h, body, tc.want)
		})
	}

	// Revoked by a second process: refused within a second everywhere.
	live := s.token(t, "--tenant", "acme", "--actor", "alice")
	if resp, _ := s.post(t, "Bearer "+live); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh token refused: %d", resp.StatusCode)
	}
	if out, err := exec.Command(binary, "token", "revoke", jtiOf(t, live), "--config", s.config, "--data-dir", s.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v %s", err, out)
	}
	revokedAt := time.Now()
	if !waitFor(3*time.Second, func() bool { resp, _ := s.post(t, "Bearer "+live); return resp.StatusCode == http.StatusUnauthorized }) {
		t.Fatal("a revoked token still works after 3 s")
	}
	if d := time.Since(revokedAt); d > 1500*time.Millisecond {
		t.Errorf("revocation took %v to take effect, want about a second at most", d)
	}
	resp, body := s.post(t, "Bearer "+live)
	checkBearerError(t, resp.Header.Get("WWW-Authenticate"), body, "the token was revoked")

	// The metadata the 401 points at.
	resp, err = http.Get(s.base + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta["resource"] != s.url {
		t.Errorf("protected resource metadata = %v", meta)
	}

	// Nothing ran: no session was made, and the refused calls left no
	// trace of a connect in the audit.
	for _, r := range auditJSON(t, s.dataDir) {
		if r.Tool == "ssh_connect" && r.Actor == "mallory" && r.Outcome == "ok" {
			t.Errorf("a refused token connected: %+v", r)
		}
	}
	c := s.client(t, s.token(t, "--tenant", "acme", "--actor", "mallory"))
	if got := mustOK(t, c.Call(t, "ssh_list_sessions", map[string]any{}))["sessions"]; len(got.([]any)) != 0 {
		t.Errorf("sessions after refusals: %v", got)
	}
}

// checkBearerError checks a 401's RFC 6750 parameters: error="invalid_token"
// and the description want, also in the body; want "" means none at all.
func checkBearerError(t *testing.T, header, body, want string) {
	t.Helper()
	if want == "" {
		if strings.Contains(header, "error=") {
			t.Errorf("a request without credentials got an error code: %q", header)
		}
		return
	}
	if !strings.Contains(header, `error="invalid_token", error_description="`+want+`"`) || !strings.Contains(body, want) {
		t.Errorf("WWW-Authenticate = %q, body %q; want error_description %q", header, body, want)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSign(t testing.TB, i *claim.Issuer, p claim.IssueParams) string {
	t.Helper()
	tok, _, err := i.Issue(p)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
