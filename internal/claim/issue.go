package claim

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer mints tandem's own tokens (`tandem token issue`), signed EdDSA
// with Key and naming it by KeyID in the "kid" header.
type Issuer struct {
	Key      ed25519.PrivateKey
	Name     string           // the "iss" value, e.g. "tandem"; required
	Audience string           // the "aud" value: the server the token is for; required
	Now      func() time.Time // nil means time.Now
}

// IssueParams describes one agent run's token. Tenant, Actor and TTL are
// required; an empty Workspace or SID, or nil Tools, leaves the claim out
// (nil Tools grants every tool, an empty non-nil slice grants none).
type IssueParams struct {
	Tenant, Actor, Workspace, SID string
	Tools                         []string
	Roles                         []string      // e.g. RoleApprover; nil leaves the claim out
	TTL                           time.Duration // at least a second: JWT times are whole seconds
}

// Issue signs a new token for p and returns it with its claim set, exactly
// as Verify will return it (fingerprint included).
func (i *Issuer) Issue(p IssueParams) (token string, c *Claims, err error) {
	switch {
	case len(i.Key) != ed25519.PrivateKeySize:
		err = errors.New("no Ed25519 signing key")
	case i.Name == "" || i.Audience == "":
		err = errors.New("issuer name and audience are required")
	case p.Tenant == "" || p.Actor == "":
		err = errors.New("tenant and actor are required")
	case p.TTL < time.Second:
		err = fmt.Errorf("TTL %v is under a second", p.TTL)
	}
	if err != nil {
		return "", nil, fmt.Errorf("claim: issue: %w", err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", nil, fmt.Errorf("claim: issue: %w", err)
	}
	// The jti is typed into `tandem token revoke JTI`: one that began with
	// '-' (base64url's 62) would read as a flag. A clear top bit keeps the
	// first character in A-Z or a-f.
	id[0] &^= 0x80
	now := time.Now
	if i.Now != nil {
		now = i.Now
	}
	t := now()
	m := jwt.MapClaims{
		"iss": i.Name,
		"sub": p.Actor,
		"aud": i.Audience,
		"tnt": p.Tenant,
		"jti": base64.RawURLEncoding.EncodeToString(id[:]),
		"iat": t.Unix(),
		"nbf": t.Unix(),
		"exp": t.Add(p.TTL).Unix(),
	}
	if p.Workspace != "" {
		m["wsp"] = p.Workspace
	}
	if p.SID != "" {
		m["sid"] = p.SID
	}
	if p.Tools != nil {
		m["tools"] = p.Tools
	}
	if p.Roles != nil {
		m["roles"] = p.Roles
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, m)
	tok.Header["kid"] = KeyID(i.Key.Public().(ed25519.PublicKey))
	token, err = tok.SignedString(i.Key)
	if err != nil {
		return "", nil, fmt.Errorf("claim: issue: %w", err)
	}
	// Read the claims back from the signed payload, so they and their
	// fingerprint are byte for byte what Verify will see.
	m2 := jwt.MapClaims{}
	if _, _, err = jwt.NewParser(jwt.WithJSONNumber()).ParseUnverified(token, m2); err == nil {
		c, err = parseClaims(m2, ClaimNames{}.withDefaults())
	}
	if err != nil {
		return "", nil, fmt.Errorf("claim: issue: %w", err)
	}
	return token, c, nil
}
