package claim

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	maxTokenLen = 16 << 10 // longer bearer tokens are refused unparsed
	cacheMax    = 10_000   // verified tokens remembered
)

// ExternalIssuer is an identity provider whose tokens tandem accepts, with
// the keys that check them and the names its claims go by.
type ExternalIssuer struct {
	Issuer string // the "iss" its tokens carry; required

	// JWKSURL is where its keys are fetched from (by "kid"). PublicKeys are
	// fixed keys, tried whatever the token's kid: ed25519.PublicKey,
	// *ecdsa.PublicKey on P-256, *rsa.PublicKey of 2048 bits or more;
	// others are never used. Both may be set.
	JWKSURL    string
	PublicKeys []crypto.PublicKey

	Audience string     // the "aud" its tokens must carry for this server; required
	Names    ClaimNames // where its tokens keep tenant, actor, ...
}

// Verifier checks bearer tokens. Set its fields before the first Verify and
// do not change them after; a Verifier must not be copied after use. It is
// safe for concurrent use.
type Verifier struct {
	// OwnName, OwnKeys and OwnAudience accept tandem's own tokens: "iss"
	// OwnName, signed EdDSA by one of OwnKeys (picked by "kid"), "aud"
	// containing OwnAudience. An empty OwnName accepts none.
	OwnName     string
	OwnKeys     []ed25519.PublicKey
	OwnAudience string

	// External lists the other issuers accepted. When two share an
	// Issuer, or one has OwnName, the first (own keys first) is used.
	External []ExternalIssuer

	MaxTTL      time.Duration // exp - iat may be at most this; zero means 24h
	Skew        time.Duration // iat and nbf may be this far in the future; zero means 60s. exp has none.
	JWKSRefetch time.Duration // least time between two fetches of one issuer's JWKS; zero means 30s

	// Exists, if set, is asked on every call whether the token's tenant
	// and workspace exist; an error refuses the token ("unknown_tenant").
	Exists func(tenant, workspace string) error
	// Revoked, if set, is asked on every call; true refuses the token.
	Revoked func(jti string) bool

	HTTPClient *http.Client     // fetches JWKS; nil means a client with a 5s timeout
	Now        func() time.Time // nil means time.Now

	once    sync.Once
	issuers map[string]*issuer
	client  *http.Client

	mu    sync.RWMutex
	cache map[[sha256.Size]byte]*Claims // by SHA-256 of the token: signature and shape already checked
}

// issuer is one accepted "iss", resolved from the Verifier's fields.
type issuer struct {
	own      bool // tandem's: EdDSA only
	audience string
	names    ClaimNames
	fixed    []verifyKey
	remote   *remoteKeys // nil without a JWKS URL
}

func (v *Verifier) init() {
	v.issuers = map[string]*issuer{}
	v.client = v.HTTPClient
	if v.client == nil {
		v.client = &http.Client{Timeout: 5 * time.Second}
	}
	if v.OwnName != "" {
		is := &issuer{own: true, audience: v.OwnAudience, names: ClaimNames{}.withDefaults()}
		for _, k := range v.OwnKeys {
			if algOf(k) == jwt.SigningMethodEdDSA.Alg() {
				is.fixed = append(is.fixed, verifyKey{kid: KeyID(k), alg: algOf(k), key: k})
			}
		}
		v.issuers[v.OwnName] = is
	}
	for _, e := range v.External {
		if _, dup := v.issuers[e.Issuer]; dup || e.Issuer == "" {
			continue
		}
		is := &issuer{audience: e.Audience, names: e.Names.withDefaults()}
		for _, k := range e.PublicKeys {
			if alg := algOf(k); alg != "" {
				is.fixed = append(is.fixed, verifyKey{alg: alg, key: k})
			}
		}
		if e.JWKSURL != "" {
			is.remote = &remoteKeys{url: e.JWKSURL}
		}
		v.issuers[e.Issuer] = is
	}
}

// Verify checks a bearer token and returns its claims, or an *Error that
// matches ErrInvalid. The signature is checked once per token and
// remembered; expiry, Exists and Revoked are checked on every call.
func (v *Verifier) Verify(ctx context.Context, token string) (*Claims, error) {
	v.once.Do(v.init)
	if token == "" || len(token) > maxTokenLen {
		return nil, refuse(reasonMalformed, "token is empty or over %d bytes", maxTokenLen)
	}
	now := v.now()
	key := sha256.Sum256([]byte(token))
	v.mu.RLock()
	c, hit := v.cache[key]
	v.mu.RUnlock()
	if !hit {
		var err error
		if c, err = v.verify(ctx, token, now); err != nil {
			return nil, err
		}
	}
	if err := v.checkTime(c, now); err != nil {
		return nil, err
	}
	if !hit {
		v.remember(key, c, now)
	}
	if v.Exists != nil {
		if err := v.Exists(c.Tenant, c.Workspace); err != nil {
			return nil, &Error{Reason: reasonUnknownTenant, Err: err}
		}
	}
	if v.Revoked != nil && v.Revoked(c.JTI) {
		return nil, refuse(reasonRevoked, "token %s is revoked", quote(c.JTI))
	}
	return c.clone(), nil
}

// verify checks what never changes for a token: its algorithm, issuer,
// signature, claim shape, lifetime and audience.
func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (*Claims, error) {
	var (
		found    *issuer
		keysUsed bool // the token got as far as the key lookup
	)
	keyfunc := func(t *jwt.Token) (any, error) {
		keysUsed = true
		var err error
		if found, err = v.issuerOf(t); err != nil {
			return nil, err
		}
		return v.candidates(ctx, found, t, now)
	}
	m := jwt.MapClaims{}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{"EdDSA", "ES256", "RS256"}),
		jwt.WithJSONNumber(),
		jwt.WithStrictDecoding(),      // one encoding per token: no malleable trailing bits
		jwt.WithoutClaimsValidation(), // checked below, with stable reasons
	)
	_, err := p.ParseWithClaims(token, m, keyfunc)
	var refusal *Error
	switch {
	case errors.As(err, &refusal):
		return nil, refusal
	case err == nil:
	case keysUsed:
		return nil, &Error{Reason: reasonSignature, Err: err}
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, &Error{Reason: reasonMalformed, Err: err}
	default: // alg missing, unknown or not accepted
		return nil, &Error{Reason: reasonAlgorithm, Err: err}
	}
	c, err := parseClaims(m, found.names)
	if err != nil {
		return nil, err
	}
	if ttl := c.Expires.Sub(c.IssuedAt); ttl > v.maxTTL() {
		return nil, refuse(reasonTTLTooLong, "lifetime %v is over %v", ttl, v.maxTTL())
	}
	if found.audience == "" || !slices.Contains(c.Audience, found.audience) {
		return nil, refuse(reasonAudience, "token is not for audience %s", quote(found.audience))
	}
	return c, nil
}

// issuerOf finds the token's issuer by its unverified "iss" and checks the
// header against it.
func (v *Verifier) issuerOf(t *jwt.Token) (*issuer, error) {
	if _, ok := t.Header["crit"]; ok {
		return nil, refuse(reasonMalformed, "header names critical extensions")
	}
	if kid, ok := t.Header["kid"]; ok {
		if _, isStr := kid.(string); !isStr {
			return nil, refuse(reasonMalformed, "header \"kid\" is not a string")
		}
	}
	iss, _ := t.Claims.(jwt.MapClaims)["iss"].(string)
	is := v.issuers[iss]
	if is == nil {
		return nil, refuse(reasonUnknownIssuer, "issuer %s is not accepted", quote(iss))
	}
	if is.own && t.Method.Alg() != jwt.SigningMethodEdDSA.Alg() {
		return nil, refuse(reasonAlgorithm, "tandem's own tokens are EdDSA, not %s", quote(t.Method.Alg()))
	}
	return is, nil
}

// candidates returns the issuer's keys that may have signed t: only keys
// of t's algorithm, and by kid when both sides name one.
func (v *Verifier) candidates(ctx context.Context, is *issuer, t *jwt.Token, now time.Time) (any, error) {
	alg := t.Method.Alg()
	kid, _ := t.Header["kid"].(string)
	keys := match(is.fixed, alg, kid)
	if is.remote != nil {
		remote, err := is.remote.lookup(ctx, v.client, now, v.refetch(), alg, kid)
		if err != nil && len(keys) == 0 {
			return nil, err
		}
		keys = append(keys, remote...)
	}
	if len(keys) == 0 {
		return nil, refuse(reasonSignature, "no %s key with kid %s", alg, quote(kid))
	}
	return jwt.VerificationKeySet{Keys: keys}, nil
}

// checkTime checks the token against the clock: exp strictly after now,
// iat and nbf no later than now plus the skew.
func (v *Verifier) checkTime(c *Claims, now time.Time) error {
	late := now.Add(v.skew())
	switch {
	case !now.Before(c.Expires):
		return refuse(reasonExpired, "expired at %s", c.Expires.UTC().Format(time.RFC3339))
	case c.IssuedAt.After(late):
		return refuse(reasonNotYetValid, "issued in the future, at %s", c.IssuedAt.UTC().Format(time.RFC3339))
	case c.NotBefore.After(late):
		return refuse(reasonNotYetValid, "not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// remember caches a verified claim set. When the cache is full it drops
// the expired entries, and everything if that frees too little.
func (v *Verifier) remember(key [sha256.Size]byte, c *Claims, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cache == nil {
		v.cache = make(map[[sha256.Size]byte]*Claims)
	}
	if len(v.cache) >= cacheMax {
		for k, e := range v.cache {
			if !now.Before(e.Expires) {
				delete(v.cache, k)
			}
		}
		if len(v.cache) >= cacheMax*3/4 {
			clear(v.cache)
		}
	}
	v.cache[key] = c
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) maxTTL() time.Duration { return orDefault(v.MaxTTL, 24*time.Hour) }
func (v *Verifier) skew() time.Duration   { return orDefault(v.Skew, 60*time.Second) }
func (v *Verifier) refetch() time.Duration {
	return orDefault(v.JWKSRefetch, 30*time.Second)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
