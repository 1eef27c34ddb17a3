package server

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/tandem-sh/tandem/internal/claim"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/web"
)

// httpMode is what `serve --http` adds to stdio mode: the listener's TLS,
// the claim verifier and the revocation list. Its zero value is stdio mode.
type httpMode struct {
	addr     string
	tls      *tls.Config
	insecure bool
	verifier *claim.Verifier
	revs     *claim.Revocations
	log      *slog.Logger
}

func newHTTPMode(o *Options, cfg *config.Config, dataDir string, log *slog.Logger) (*httpMode, error) {
	if o.HTTP == "" {
		if o.TLSCert != "" || o.TLSKey != "" || o.InsecureHTTP {
			return nil, errors.New("--tls-cert, --tls-key and --insecure-http apply with --http only")
		}
		return &httpMode{}, nil
	}
	h := &httpMode{addr: o.HTTP, insecure: o.InsecureHTTP, log: log}
	switch {
	case (o.TLSCert == "") != (o.TLSKey == ""):
		return nil, errors.New("--tls-cert and --tls-key go together: pass both, or neither for plain HTTP")
	case o.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		h.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	key, err := SigningKey(cfg, dataDir)
	if err != nil {
		return nil, fmt.Errorf("claim key: %w", err)
	}
	external, err := externalIssuers(cfg)
	if err != nil {
		return nil, err
	}
	h.revs = &claim.Revocations{Logger: log}
	h.verifier = &claim.Verifier{
		OwnName:     cfg.Auth.Issuer,
		OwnKeys:     []ed25519.PublicKey{key.Public().(ed25519.PublicKey)},
		OwnAudience: cfg.Auth.Audience,
		External:    external,
		MaxTTL:      time.Duration(cfg.Auth.MaxTTL),
		Exists:      cfg.Exists,
		Revoked:     h.revs.Revoked,
	}
	return h, nil
}

// externalIssuers turns auth.issuers into the verifier's form.
func externalIssuers(cfg *config.Config) ([]claim.ExternalIssuer, error) {
	var out []claim.ExternalIssuer
	for i, is := range cfg.Auth.Issuers {
		e := claim.ExternalIssuer{Issuer: is.Issuer, JWKSURL: is.JWKSURL, Audience: is.Audience,
			Names: claim.ClaimNames(is.Claims)}
		for j, p := range is.PublicKeys {
			k, err := claim.ParsePublicKeyPEM([]byte(p))
			if err != nil {
				return nil, fmt.Errorf("config: auth.issuers[%d].publicKeys[%d]: %w", i, j, err)
			}
			e.PublicKeys = append(e.PublicKeys, k)
		}
		out = append(out, e)
	}
	return out, nil
}

func (h *httpMode) on() bool { return h.addr != "" }

// useStore reads the revoked tokens from the store, as they stand now and
// (in run) as they change.
func (h *httpMode) useStore(ctx context.Context, st claim.RevocationSource) error {
	if !h.on() {
		return nil
	}
	h.revs.Source = st
	if err := h.revs.Refresh(ctx); err != nil {
		return fmt.Errorf("read revoked tokens: %w", err)
	}
	return nil
}

func (h *httpMode) scheme() string {
	if h.tls != nil {
		return "https"
	}
	return "http"
}

// listen opens the one listener of the browser pages and, in HTTP mode,
// /mcp. A non-loopback address serves bearer tokens, so it needs TLS or an
// explicit --insecure-http.
func (h *httpMode) listen(ctx context.Context, o *Options, log *slog.Logger) (net.Listener, error) {
	if !h.on() {
		ln, err := web.Listen(ctx, o.Web, &web.ListenOptions{Logger: log})
		if errors.Is(err, web.ErrNotLoopback) {
			return nil, fmt.Errorf("--web %s is not a loopback address, and the browser pages hand out shells: keep --web on 127.0.0.1 and reach it from another machine through a tunnel (ssh -L 7777:127.0.0.1:7777 this-host), or serve the pages with --http ADDR --tls-cert FILE --tls-key FILE", o.Web)
		}
		return ln, err
	}
	remoteOK := h.tls != nil || h.insecure
	// Clients are configured with this address: a taken port is an
	// error, never a move to another one.
	ln, err := web.Listen(ctx, h.addr, &web.ListenOptions{Logger: log, AllowRemote: remoteOK, Exact: true})
	if errors.Is(err, web.ErrNotLoopback) {
		return nil, fmt.Errorf("--http %s is not a loopback address: serve it with --tls-cert and --tls-key, or pass --insecure-http to send bearer tokens in clear text knowingly", h.addr)
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		_, port, _ := net.SplitHostPort(h.addr)
		return nil, fmt.Errorf("--http %s: port %s is in use (another tandem serve --http?): stop what listens there, or pass another port; clients configured with this URL would reach it, not this tandem: %w", h.addr, port, err)
	}
	if err != nil {
		return nil, err
	}
	if h.tls != nil {
		ln = tls.NewListener(ln, h.tls)
	}
	return ln, nil
}

// routes are /mcp and its RFC 9728 metadata, beside the browser pages.
func (h *httpMode) routes(srv *mcp.Server, base string) map[string]http.Handler {
	const metaPath = "/.well-known/oauth-protected-resource"
	mcpH, meta := srv.HTTPHandler(mcp.HTTPOptions{
		Verify:      h.verifier.Verify,
		ResourceURL: base + "/mcp",
		MetadataURL: base + metaPath,
		OnRefused: func(r *http.Request, err error) {
			// The reason, never the token.
			h.log.Warn("bearer token refused", "remote", r.RemoteAddr, "reason", claimReason(err))
		},
	})
	return map[string]http.Handler{"/mcp": mcpH, metaPath: meta, metaPath + "/mcp": meta}
}

// approver accepts, in HTTP mode, a verified claim with the approver
// role as the bearer token of a forwarded approval, for the claim's own
// tenant only.
func (h *httpMode) approver(ctx context.Context, bearer string) (forward.Forwarder, bool) {
	if !h.on() {
		return forward.Forwarder{}, false
	}
	c, err := h.verifier.Verify(ctx, bearer)
	if err != nil {
		h.log.Warn("approver token refused", "reason", claimReason(err))
		return forward.Forwarder{}, false
	}
	if c.Tenant == "" {
		return forward.Forwarder{}, false
	}
	return forward.Forwarder{Tenant: c.Tenant, Name: c.Actor}, c.Has(claim.RoleApprover)
}

// claimReason is the stable word for why a claim was refused.
func claimReason(err error) string {
	var ce *claim.Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return "invalid"
}

// run keeps revocations fresh until ctx ends: the web listener serves the
// requests.
func (h *httpMode) run(ctx context.Context) error {
	h.revs.Run(ctx)
	return nil
}

// signingKey is tandem's own token key: auth.signingKey when set (the
// file a cluster's nodes share), else claim.key in the data dir, created
// on first use.
func SigningKey(cfg *config.Config, dataDir string) (ed25519.PrivateKey, error) {
	if cfg.Auth.SigningKey != "" {
		return claim.LoadKeyFile(cfg.Auth.SigningKey)
	}
	return claim.LoadOrCreateKey(dataDir)
}
