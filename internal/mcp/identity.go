package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/tandem-sh/tandem/internal/claim"
	"github.com/tandem-sh/tandem/internal/session"
)

// claimsKey is where a verified claim travels in auth.TokenInfo.Extra.
const claimsKey = "tandem.claims"

// errNoClaim is a request without a verified claim on a server that needs
// one; the HTTP layer refuses those first, so this is a wiring fault.
var errNoClaim = errors.New("no verified claim on the request")

// identify says who makes a request: the verified claim that the HTTP
// transport put on it, or, over stdio, the connection itself.
func (s *Server) identify(ss *mcp.ServerSession, extra *mcp.RequestExtra) (session.Caller, *claim.Claims, error) {
	if extra != nil && extra.TokenInfo != nil {
		if c, ok := extra.TokenInfo.Extra[claimsKey].(*claim.Claims); ok && c != nil {
			return session.Caller{Tenant: c.Tenant, Actor: c.Actor, ID: "sid:" + c.SID}, c, nil
		}
	}
	if s.deps.RequireClaims {
		return session.Caller{}, nil, errNoClaim
	}
	return s.connCaller(ss), nil, nil
}

// connCaller identifies a stdio connection. Each connection gets a random
// identity on first use, forgotten (and its sessions ended) when it
// closes, so identities are never reused.
func (s *Server) connCaller(ss *mcp.ServerSession) session.Caller {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.callers[ss]
	if !ok {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id = "conn-" + hex.EncodeToString(b)
		s.callers[ss] = id
		go s.forget(ss, id)
	}
	return session.Caller{Tenant: s.deps.Tenant, ID: id}
}

func (s *Server) forget(ss *mcp.ServerSession, id string) {
	_ = ss.Wait()
	s.mu.Lock()
	delete(s.callers, ss)
	s.mu.Unlock()
	s.deps.Sessions.EndOwner(session.Caller{Tenant: s.deps.Tenant, ID: id})
}

// onlyAllowedTools hides from tools/list the tools a caller's claim does
// not allow; calling one anyway gets tool_not_allowed from the handler.
func onlyAllowedTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		lt, ok := res.(*mcp.ListToolsResult)
		if method != "tools/list" || err != nil || !ok {
			return res, err
		}
		c := claimOf(req.GetExtra())
		if c == nil || c.Tools == nil {
			return res, err
		}
		out := *lt
		out.Tools = slices.DeleteFunc(slices.Clone(lt.Tools), func(t *mcp.Tool) bool { return !c.Allows(t.Name) })
		return &out, nil
	}
}

func claimOf(extra *mcp.RequestExtra) *claim.Claims {
	if extra == nil {
		return nil
	}
	return claimOfToken(extra.TokenInfo)
}

// claimOfToken is the verified claim that the bearer check put on a token's
// info, or nil.
func claimOfToken(ti *auth.TokenInfo) *claim.Claims {
	if ti == nil {
		return nil
	}
	c, _ := ti.Extra[claimsKey].(*claim.Claims)
	return c
}

// Verify checks a bearer token and returns its verified claim.
type Verify func(ctx context.Context, token string) (*claim.Claims, error)

// HTTPOptions configure [Server.HTTPHandler].
type HTTPOptions struct {
	// Verify checks each request's bearer token. Required.
	Verify Verify
	// ResourceURL is the MCP endpoint's public URL, named in the RFC 9728
	// metadata that a 401 points to.
	ResourceURL string
	// MetadataURL is where that metadata is served.
	MetadataURL string
	// OnRefused, if set, is told of every refused token (never the token).
	OnRefused func(r *http.Request, err error)
}

// HTTPHandler serves MCP over Streamable HTTP, stateless, so that both
// 2025-11-25 and 2026-07-28 clients work and nothing depends on the
// transport's session id. Every request must carry a valid bearer claim: a
// missing or refused one gets 401 with a WWW-Authenticate header naming the
// resource metadata, and nothing runs. It also returns the metadata handler.
func (s *Server) HTTPHandler(o HTTPOptions) (mcpHandler, metadata http.Handler) {
	// The bearer is verified once, by refuseBearer below, which answers a
	// refused token itself (RFC 6750: error and error_description); the
	// SDK's middleware then only carries the verified claim to the tools.
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := r.Context().Value(verifiedKey{}).(*claim.Claims)
		if !ok || c == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.Tenant + "/" + c.Actor + "/" + c.SID, Expiration: c.Expires,
			Extra: map[string]any{claimsKey: c}}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.sdkLog,
			// An upload is one request (the bearer is checked before the body is read).
			MaxRequestBodyBytes: int64(max(mcp.DefaultMaxRequestBodyBytes, MessageBytes(s.uploadLimit())))})
	mw := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: o.MetadataURL})
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.ResourceURL,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "tandem",
	})
	return o.refuseBearer(mw(s.inflight.wrap(h))), meta
}

// verifiedKey is where refuseBearer leaves a verified claim on a request.
type verifiedKey struct{}

// refuseBearer verifies the request's bearer token before anything else
// reads the request. A refused token is answered 401 with RFC 6750's
// error="invalid_token" and an error_description that says why (expired,
// revoked, for another audience, from an unknown issuer), so a client or
// its user can act on it without reading tandem's log. The description is
// built from the refusal's stable reason, never from the token's own
// words. A request with no bearer at all goes on to the SDK's middleware,
// which answers it 401 with the resource metadata and no error code, as
// RFC 6750 asks for a request that carried no credentials.
func (o HTTPOptions) refuseBearer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, token, found := strings.Cut(r.Header.Get("Authorization"), " ")
		token = strings.TrimSpace(token)
		if !found || !strings.EqualFold(kind, "bearer") || token == "" {
			next.ServeHTTP(w, r)
			return
		}
		c, err := o.Verify(r.Context(), token)
		if err != nil {
			if o.OnRefused != nil {
				o.OnRefused(r, err)
			}
			desc := refusalDescription(err)
			params := []string{`error="invalid_token"`, `error_description="` + desc + `"`}
			if o.MetadataURL != "" {
				params = append([]string{fmt.Sprintf("resource_metadata=%q", o.MetadataURL)}, params...)
			}
			w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
			http.Error(w, "invalid_token: "+desc, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), verifiedKey{}, c)))
	})
}

// refusalDescription says in one line, fit for a quoted header value, why
// a token was refused and what to do about it.
func refusalDescription(err error) string {
	var ce *claim.Error
	if !errors.As(err, &ce) {
		return "the token was refused"
	}
	switch ce.Reason {
	case "expired":
		return "the token expired; mint a new one (tandem token issue) and give it to the client"
	case "not_yet_valid":
		return "the token is not valid yet; check the clocks of the issuer and this server"
	case "revoked":
		return "the token was revoked"
	case "audience":
		return "the token was minted for another audience than this server (auth.audience)"
	case "unknown_issuer":
		return "the token's issuer is not one this server accepts (auth.issuers)"
	case "signature", "algorithm":
		return "the token's signature does not verify with the issuer's keys"
	case "ttl_too_long":
		return "the token lives longer than this server's auth.maxTTL allows"
	case "unknown_tenant":
		return "the token's tenant or workspace is not configured on this server"
	case "jwks_unavailable":
		return "the issuer's keys could not be fetched; try again shortly"
	default:
		return "the token is malformed or lacks a required claim"
	}
}

// StdioClient names the live stdio connection id (an actor "conn-…") by
// the client it declared: "stdio client (claude-code 2.1.0)", or "stdio
// client" once it is gone or said nothing. The operator's dashboard shows
// it instead of the random id.
func (s *Server) StdioClient(id string) string {
	const name = "stdio client"
	if client := s.clientOf(id); client != "" {
		return name + " (" + client + ")"
	}
	return name
}

// clientOf is the name and version the live stdio connection id declared
// in its initialize request ("claude-code 2.1.0"), or "".
func (s *Server) clientOf(id string) string {
	s.mu.Lock()
	var ss *mcp.ServerSession
	for k, v := range s.callers {
		if v == id {
			ss = k
			break
		}
	}
	s.mu.Unlock()
	if ss == nil {
		return ""
	}
	p := ss.InitializeParams()
	if p == nil || p.ClientInfo == nil || p.ClientInfo.Name == "" {
		return ""
	}
	client := clip(p.ClientInfo.Name, 64)
	if v := p.ClientInfo.Version; v != "" {
		client += " " + clip(v, 32)
	}
	return client
}

// auditActor is the actor an audit record names for c: a claim's actor;
// for a stdio connection the client it declared, with the connection's
// id in parentheses ("claude-code 2.1.0 (conn-…)"), so that tandem audit
// tail names the agent as the dashboard does, after the connection is
// gone too; the bare id for a client that declared no name.
func (s *Server) auditActor(c session.Caller) string {
	if c.Actor != "" {
		return c.Actor
	}
	if client := s.clientOf(c.ID); client != "" && strings.HasPrefix(c.ID, "conn-") {
		return client + " (" + c.ID + ")"
	}
	return c.ID
}

// AuditClient splits an audit actor that auditActor made for a stdio
// connection ("claude-code 2.1.0 (conn-…)") into the client's name and the
// connection id; ok is false for any other actor.
func AuditClient(actor string) (client, id string, ok bool) {
	rest, found := strings.CutSuffix(actor, ")")
	i := strings.LastIndex(rest, " (conn-")
	if !found || i <= 0 {
		return "", "", false
	}
	return rest[:i], rest[i+2:], true
}
