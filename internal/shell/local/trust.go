package local

import (
	"fmt"
	"os"
	"path/filepath"
)

// trustBundleName is the session's trust bundle in its run dir.
const trustBundleName = "ca-bundle.pem"

// trustVars name the bundle for every tool tandem's users run: OpenSSL
// and Go (SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS), npm, which ignores
// that on proxied connections (npm_config_cafile), Python requests, curl,
// git, pip and cargo.
var trustVars = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
	"GIT_SSL_CAINFO", "PIP_CERT", "CARGO_HTTP_CAINFO", "npm_config_cafile"}

// trustBundler is a session's proxy that inspects some hosts' TLS:
// *egress.Listener. TrustBundle is nil when it inspects none.
type trustBundler interface {
	TrustBundle() []byte
}

// trustEnv writes the session's trust bundle (the system's roots and the
// session's CA certificate, never its key) in its run dir and returns the
// variables that name it; nothing when the proxy inspects no host.
func (n *netSetup) trustEnv(runDir string) ([]string, error) {
	if n == nil || n.proxy == nil {
		return nil, nil
	}
	tb, ok := n.proxy.(trustBundler)
	if !ok {
		return nil, nil
	}
	b := tb.TrustBundle()
	if b == nil {
		return nil, nil
	}
	p := filepath.Join(runDir, trustBundleName)
	if err := os.WriteFile(p, b, 0o444); err != nil {
		return nil, fmt.Errorf("local dial: the session's trust bundle: %w", err)
	}
	env := make([]string, 0, len(trustVars))
	for _, v := range trustVars {
		env = append(env, v+"="+p)
	}
	return env, nil
}
