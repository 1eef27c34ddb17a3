package claim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Claims is a verified claim set: who is calling (Actor), on whose behalf
// (Tenant, Workspace), with which tools, and for how long.
type Claims struct {
	Issuer    string
	Actor     string   // "sub", or the issuer's mapped name
	Tenant    string   // "tnt"
	Workspace string   // "wsp"; empty when absent
	Tools     []string // "tools"; nil means every tool, empty means none
	Roles     []string // "roles", e.g. RoleApprover; absent means none
	SID       string   // "sid"; the JTI when absent
	JTI       string   // "jti"; the handle for revocation
	Audience  []string // "aud"

	IssuedAt, NotBefore, Expires time.Time // NotBefore is zero when absent

	// Fingerprint is the hex SHA-256 of the verified payload in canonical
	// JSON, for the audit log. The payload is decoded into a map with
	// numbers kept as their literal text, then re-encoded by encoding/json:
	// object keys sorted, no insignificant whitespace, numbers exactly as
	// they appeared, strings escaped the encoding/json way (HTML characters
	// left as they are). Two tokens with the same payload share it whatever
	// their header, signature or whitespace; any change to a claim changes it.
	Fingerprint string
}

// Allows reports whether the claim permits calling the tool name. A claim
// without a "tools" claim permits every tool.
func (c *Claims) Allows(tool string) bool {
	if c == nil {
		return false
	}
	return c.Tools == nil || slices.Contains(c.Tools, tool)
}

// RoleApprover lets a claim answer approvals forwarded to this tandem
// (POST /api/approvals), as the operator token does.
const RoleApprover = "approver"

// Has reports whether the claim carries role.
func (c *Claims) Has(role string) bool { return c != nil && slices.Contains(c.Roles, role) }

// clone returns a copy that shares no slices with c, so a cached claim set
// is never changed through a returned one.
func (c *Claims) clone() *Claims {
	d := *c
	d.Tools = slices.Clone(c.Tools)
	d.Roles = slices.Clone(c.Roles)
	d.Audience = slices.Clone(c.Audience)
	return &d
}

// ClaimNames maps an issuer's claim names onto tandem's. A zero field means
// the default, shown in brackets.
type ClaimNames struct {
	Tenant    string // ["tnt"]
	Actor     string // ["sub"]
	Workspace string // ["wsp"]
	Tools     string // ["tools"]
	SID       string // ["sid"]
}

func (n ClaimNames) withDefaults() ClaimNames {
	def := func(s, d string) string {
		if s == "" {
			return d
		}
		return s
	}
	return ClaimNames{
		Tenant:    def(n.Tenant, "tnt"),
		Actor:     def(n.Actor, "sub"),
		Workspace: def(n.Workspace, "wsp"),
		Tools:     def(n.Tools, "tools"),
		SID:       def(n.SID, "sid"),
	}
}

// ErrInvalid is matched by every refusal of Verify, so a caller maps them
// all to one answer (HTTP 401) with a single errors.Is.
var ErrInvalid = errors.New("invalid bearer token")

// Refusal reasons: short, stable words for logs and audit.
const (
	reasonMalformed       = "malformed"
	reasonAlgorithm       = "algorithm"
	reasonUnknownIssuer   = "unknown_issuer"
	reasonSignature       = "signature"
	reasonExpired         = "expired"
	reasonNotYetValid     = "not_yet_valid"
	reasonTTLTooLong      = "ttl_too_long"
	reasonAudience        = "audience"
	reasonRevoked         = "revoked"
	reasonUnknownTenant   = "unknown_tenant"
	reasonClaims          = "claims"
	reasonJWKSUnavailable = "jwks_unavailable"
)

// Error is a refusal of Verify. Reason is one stable word ("malformed",
// "algorithm", "unknown_issuer", "signature", "expired", "not_yet_valid",
// "ttl_too_long", "audience", "revoked", "unknown_tenant", "claims",
// "jwks_unavailable") for logs and audit; Err says more. It matches
// ErrInvalid, and its text never contains the token.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return "claim: " + e.Reason
	}
	return "claim: " + e.Reason + ": " + e.Err.Error()
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func refuse(reason string, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// quote renders an attacker-chosen value for an error message, cut short.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return strconv.Quote(s)
}

// parseClaims builds Claims from a payload decoded with json.Number
// numbers, mapping names through n (already defaulted). It checks the shape
// only; times, audience and policy are the Verifier's.
func parseClaims(m map[string]any, n ClaimNames) (*Claims, error) {
	c := &Claims{}
	var err error
	str := func(name string, required bool) string {
		v, ok := m[name]
		s, isStr := v.(string)
		switch {
		case err != nil:
		case !ok && !required:
		case !isStr:
			err = refuse(reasonClaims, "claim %q is missing or not a string", name)
		case s == "" && required:
			err = refuse(reasonClaims, "claim %q is empty", name)
		}
		return s
	}
	c.Issuer = str("iss", false)
	c.JTI = str("jti", true)
	c.Tenant = str(n.Tenant, true)
	c.Actor = str(n.Actor, true)
	c.Workspace = str(n.Workspace, false)
	c.SID = str(n.SID, false)
	if err != nil {
		return nil, err
	}
	if c.SID == "" {
		c.SID = c.JTI
	}
	if c.Expires, err = numericDate(m, "exp", true); err != nil {
		return nil, err
	}
	if c.IssuedAt, err = numericDate(m, "iat", true); err != nil {
		return nil, err
	}
	if c.NotBefore, err = numericDate(m, "nbf", false); err != nil {
		return nil, err
	}
	if c.Audience, err = audience(m["aud"]); err != nil {
		return nil, err
	}
	if v, ok := m[n.Tools]; ok {
		if c.Tools, ok = stringArray(v); !ok {
			return nil, refuse(reasonClaims, "claim %q is not an array of strings", n.Tools)
		}
	}
	if v, ok := m["roles"]; ok {
		if c.Roles, ok = stringArray(v); !ok {
			return nil, refuse(reasonClaims, `claim "roles" is not an array of strings`)
		}
	}
	if c.Fingerprint, err = fingerprint(m); err != nil {
		return nil, refuse(reasonMalformed, "fingerprint: %w", err)
	}
	return c, nil
}

// numericDate reads a JWT NumericDate (seconds since the epoch, possibly
// fractional). A missing optional date is the zero time.
func numericDate(m map[string]any, name string, required bool) (time.Time, error) {
	v, ok := m[name]
	if !ok && !required {
		return time.Time{}, nil
	}
	num, isNum := v.(json.Number)
	if !isNum {
		return time.Time{}, refuse(reasonClaims, "claim %q is missing or not a number", name)
	}
	if i, err := num.Int64(); err == nil {
		return time.Unix(i, 0), nil
	}
	f, err := num.Float64()
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1<<62 {
		return time.Time{}, refuse(reasonClaims, "claim %q is not a usable number", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// audience reads "aud", a string or an array of strings.
func audience(v any) ([]string, error) {
	if s, ok := v.(string); ok {
		return []string{s}, nil
	}
	if v != nil {
		if ss, ok := stringArray(v); ok {
			return ss, nil
		}
	}
	return nil, refuse(reasonAudience, "claim \"aud\" is missing or not a string or an array of strings")
}

// stringArray converts a decoded JSON array of strings; an empty array gives a
// non-nil empty slice.
func stringArray(v any) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// fingerprint is the hex SHA-256 of m in canonical JSON (see Claims).
func fingerprint(m map[string]any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", err
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}
