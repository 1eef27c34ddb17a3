package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"

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
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		c, err := o.Verify(ctx, token)
		if err != nil {
			if o.OnRefused != nil {
				o.OnRefused(r, err)
			}
			// The reason goes to the log and the audit; the client learns only
			// that the token was refused.
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: c.Tenant + "/" + c.Actor + "/" + c.SID, Expiration: c.Expires,
			Extra: map[string]any{claimsKey: c}}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.srv },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: s.sdkLog})
	mw := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: o.MetadataURL})
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               o.ResourceURL,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "tandem",
	})
	return mw(s.inflight.wrap(h)), meta
}
