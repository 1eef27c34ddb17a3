package claim

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	maxJWKSBody = 1 << 20   // bytes read from a JWKS endpoint
	jwksMaxAge  = time.Hour // a fetched JWKS is refreshed after this, so keys an issuer drops stop working
)

// jwk is one RFC 7517 JSON Web Key; the fields used by OKP, EC and RSA keys.
type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Kid string `json:"kid,omitempty"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
}

// JWKS renders public keys as an RFC 7517 JSON Web Key Set, so an identity
// gateway or another tandem can verify tokens this one issues (`tandem token
// jwks`). Each key carries its KeyID as "kid".
func JWKS(keys ...ed25519.PublicKey) ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{}}
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("claim: jwks: Ed25519 key of %d bytes", len(k))
		}
		set.Keys = append(set.Keys, jwk{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k),
			Kid: KeyID(k), Alg: "EdDSA", Use: "sig",
		})
	}
	return json.Marshal(set)
}

// verifyKey is a public key that may check a signature, with the one alg
// it serves and, when known, its kid.
type verifyKey struct {
	kid, alg string
	key      crypto.PublicKey
}

// match returns the keys of ks that may have signed a token with alg and
// kid: keys of that alg whose kid is the token's, or either is absent.
func match(ks []verifyKey, alg, kid string) []jwt.VerificationKey {
	var out []jwt.VerificationKey
	for _, k := range ks {
		if k.alg == alg && (kid == "" || k.kid == "" || k.kid == kid) {
			out = append(out, k.key)
		}
	}
	return out
}

// parseJWKS reads a JWK Set, keeping the signature keys Verify can use
// (OKP/Ed25519, EC/P-256, RSA of 2048 bits or more) and skipping others.
func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, err
	}
	var out []verifyKey
	for _, j := range set.Keys {
		if j.Use != "" && j.Use != "sig" {
			continue
		}
		k, err := j.publicKey()
		if err != nil {
			continue
		}
		alg := algOf(k)
		if alg == "" || (j.Alg != "" && j.Alg != alg) {
			continue
		}
		out = append(out, verifyKey{kid: j.Kid, alg: alg, key: k})
	}
	return out, nil
}

func (j jwk) publicKey() (crypto.PublicKey, error) {
	b := func(s string) []byte {
		v, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return nil
		}
		return v
	}
	switch {
	case j.Kty == "OKP" && j.Crv == "Ed25519":
		if x := b(j.X); len(x) == ed25519.PublicKeySize {
			return ed25519.PublicKey(x), nil
		}
	case j.Kty == "EC" && j.Crv == "P-256":
		x, y := b(j.X), b(j.Y)
		if len(x) == 32 && len(y) == 32 {
			return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		}
	case j.Kty == "RSA":
		n, e := b(j.N), b(j.E)
		if len(n) > 0 && len(e) > 0 && len(e) <= 4 {
			exp := int(new(big.Int).SetBytes(e).Int64())
			if exp >= 3 && exp < 1<<31 && exp%2 == 1 {
				return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
			}
		}
	}
	return nil, errors.New("unsupported or malformed key")
}

// remoteKeys is one external issuer's JWKS, fetched when first needed,
// when older than jwksMaxAge, or when a token names a kid it lacks; but at
// most once per refetch interval, so unknown kids cannot hammer the issuer.
type remoteKeys struct {
	url string

	mu        sync.Mutex
	keys      []verifyKey
	fetched   time.Time     // last success; zero before the first
	attempted time.Time     // last attempt, successful or not
	lastErr   error         // of the last attempt
	inflight  chan struct{} // closed when the running fetch ends; nil when none runs
}

// lookup returns the keys that may verify a token with alg and kid. It
// fails with jwks_unavailable only while no fetch has ever succeeded. A
// caller that cannot be answered from the keys at hand waits for a fetch
// already running rather than starting its own.
func (r *remoteKeys) lookup(ctx context.Context, client *http.Client, now time.Time, interval time.Duration, alg, kid string) ([]jwt.VerificationKey, error) {
	for {
		r.mu.Lock()
		known := kid == ""
		for _, k := range r.keys {
			known = known || k.kid == kid
		}
		answerable := !r.fetched.IsZero() && known
		need := !answerable || now.Sub(r.fetched) >= jwksMaxAge
		if ch := r.inflight; need && ch != nil && !answerable && ctx.Err() == nil {
			r.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
			}
			continue
		}
		allowed := r.inflight == nil && (r.attempted.IsZero() || now.Sub(r.attempted) >= interval)
		if !need || !allowed || ctx.Err() != nil {
			keys, err := r.current(ctx, alg, kid)
			r.mu.Unlock()
			return keys, err
		}
		r.fetch(ctx, client, now)
	}
}

// current answers from the keys at hand; it is called with r.mu held.
func (r *remoteKeys) current(ctx context.Context, alg, kid string) ([]jwt.VerificationKey, error) {
	if r.fetched.IsZero() {
		err := r.lastErr
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = errors.New("no keys fetched yet")
		}
		return nil, &Error{Reason: reasonJWKSUnavailable, Err: err}
	}
	return match(r.keys, alg, kid), nil
}

// fetch runs one fetch; it is called with r.mu held and returns with it
// released.
func (r *remoteKeys) fetch(ctx context.Context, client *http.Client, now time.Time) {
	ch := make(chan struct{})
	prev := r.attempted
	r.inflight, r.attempted = ch, now
	r.mu.Unlock()

	keys, err := fetchJWKS(ctx, client, r.url)

	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = err
	switch {
	case err == nil:
		r.keys, r.fetched = keys, now
	case ctx.Err() != nil:
		// The caller gave up; that says nothing of the issuer, so the
		// next caller may try at once.
		r.attempted = prev
	}
	r.inflight = nil
	close(ch)
}

func fetchJWKS(ctx context.Context, client *http.Client, url string) ([]verifyKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := noRedirects(client).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		return nil, fmt.Errorf("fetch jwks %s: %s to %q: redirects are not followed; configure the final URL as jwksUrl", url, resp.Status, resp.Header.Get("Location"))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBody+1))
	if err != nil {
		return nil, fmt.Errorf("fetch jwks %s: %w", url, err)
	}
	if len(body) > maxJWKSBody {
		return nil, fmt.Errorf("fetch jwks %s: body over %d bytes", url, maxJWKSBody)
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks %s: %w", url, err)
	}
	return keys, nil
}

// noRedirects returns a copy of client that follows no redirect: the keys
// that verify tokens come from the URL the operator configured, never from
// wherever that address (or someone who took it over) points elsewhere.
func noRedirects(client *http.Client) *http.Client {
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}
