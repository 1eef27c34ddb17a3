package target

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/redact"
)

// ErrCredential is wrapped by the error of a session whose target's
// network.credentials cannot be used.
var ErrCredential = errors.New("a network credential cannot be used")

// credentials reads the secrets of a target's network.credentials, from
// the operator's files or tandem's own environment, when a session
// starts (a rotated token is picked up by the next session). It returns
// what the egress proxy adds, and each secret and header value for the
// session's redactor. Where a secret is missing, the agent learns which
// credential; the path or variable is the operator's to see, in the log.
func (r *Resolver) credentials(target string, cs []config.Credential) ([]egress.Credential, []redact.Literal, error) {
	var out []egress.Credential
	var held []redact.Literal
	for _, c := range cs {
		secret, err := readSecret(c)
		if err == nil && secret == "" {
			err = errors.New("the secret is empty")
		}
		var roots *x509.CertPool
		if err == nil && c.CAFile != "" {
			var b []byte
			if b, err = os.ReadFile(c.CAFile); err == nil {
				roots = x509.NewCertPool()
				if !roots.AppendCertsFromPEM(b) {
					err = fmt.Errorf("caFile %s holds no PEM certificate", c.CAFile)
				}
			}
		}
		if err != nil {
			if r.Log != nil {
				r.Log.Error("a session could not start: a network credential cannot be used", "target", target, "credential", c.Name, "err", err)
			}
			return nil, nil, fmt.Errorf("%w: target %q, credential %q; tandem's log says why. Ask the operator to fix it", ErrCredential, target, c.Name)
		}
		header := c.Header
		if header == "" {
			header = "Authorization"
		}
		value := config.CredentialValue(c.Value, secret)
		out = append(out, egress.Credential{Name: c.Name, Host: c.Host, Path: c.Path, Header: header, Value: value, Replace: c.Replace, RootCAs: roots})
		held = append(held, redact.Literal{Value: secret, Kind: "credential"})
		if i := strings.Index(value, " "); i >= 0 && value[i+1:] != secret {
			// A Basic credential's base64: what an echo would show too.
			held = append(held, redact.Literal{Value: value[i+1:], Kind: "credential"})
		}
	}
	return out, held, nil
}

// readSecret reads a credential's secret: a file's content without its
// trailing line break, or a variable of tandem's own environment.
func readSecret(c config.Credential) (string, error) {
	if c.SecretEnv != "" {
		v, ok := os.LookupEnv(c.SecretEnv)
		if !ok {
			return "", fmt.Errorf("secretEnv %s is not set in tandem's environment", c.SecretEnv)
		}
		return strings.TrimSpace(v), nil
	}
	b, err := os.ReadFile(c.SecretFile)
	if err != nil {
		return "", fmt.Errorf("secretFile: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
