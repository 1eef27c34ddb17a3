// Package claim is tandem's bearer-token authority for HTTP mode: it issues,
// verifies, fingerprints and tracks the revocation of the short-lived signed
// JWTs ("claims") that an orchestrator mints for each agent run. It owns the
// token format, the accepted algorithms, tandem's own Ed25519 signing key,
// the JWKS of external issuers and the in-memory revocation set. It must not
// know MCP, HTTP routing, sessions, SQL or tandem's configuration: policy
// arrives as callbacks ([Verifier.Exists], [Verifier.Revoked]) and
// revocations through the small [RevocationSource] interface.
//
// # Flow
//
//	orchestrator ──Issue──▶ token ──▶ agent's MCP client
//	                                       │ Authorization: Bearer <token>
//	                                       ▼
//	                   Verifier.Verify ──▶ *Claims ──▶ mcp (tenant, actor, tools)
//	                     │  signature: own keys by kid, or the issuer's JWKS
//	                     │  time, audience, shape: every call
//	                     └─ Exists, Revoked: every call
//
// A token names its issuer in "iss"; the [Verifier] looks the issuer up
// (tandem's own, or one of [Verifier.External]) and checks the signature with
// that issuer's keys only, so one provider can never mint tokens for another.
// Only EdDSA, ES256 and RS256 are accepted, and the key's type must match the
// algorithm: "none" and every HMAC are refused, so a public key can never be
// used as a shared secret.
//
// # Refusals
//
// Every refusal is an [*Error] that matches [ErrInvalid] (the caller answers
// HTTP 401) and carries one stable word in Reason for logs and audit. No
// error text contains the token.
//
// # Fingerprint
//
// [Claims.Fingerprint] is the hex SHA-256 of the verified payload in a
// canonical JSON form (see [Claims]); the audit log records it so a call can
// be tied to the exact claim set that authorised it.
package claim
