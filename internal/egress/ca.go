package egress

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// CA is a session's own certificate authority: the proxy signs with it
// the certificates it shows the session's programs for the hosts it
// inspects. Its private key lives only in this value (tandem's memory),
// never on disk; the session gets its certificate alone, in its trust
// bundle. Its name constraints limit it to the hosts the session's
// config inspects, so a copy of its certificate trusted elsewhere could
// vouch for no other name.
type CA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	der  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// maxLeaves bounds the certificates a session's CA keeps.
const maxLeaves = 1024

// caLifetime bounds the CA and its certificates: longer than any session.
const caLifetime = 30 * 24 * time.Hour

// NewCA makes a CA (ECDSA P-256) that may sign for names under names
// ("*.example.com" counts as example.com and below) and the addresses in
// nets; with neither it may sign for nothing.
func NewCA(session string, names []string, nets []netip.Prefix) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("session CA: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("session CA: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tandem session CA " + session, Organization: []string{"tandem"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// Critical: a client that cannot read the constraints refuses the
		// CA rather than trusting it for every name.
		PermittedDNSDomainsCritical: true,
	}
	for _, n := range names {
		tmpl.PermittedDNSDomains = append(tmpl.PermittedDNSDomains, strings.TrimPrefix(n, "*."))
	}
	for _, n := range nets {
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, netipNet(n))
	}
	if len(tmpl.PermittedDNSDomains) == 0 {
		// An empty list would permit every name: exclude them all.
		tmpl.ExcludedDNSDomains = []string{""}
	}
	if len(tmpl.PermittedIPRanges) == 0 {
		tmpl.PermittedIPRanges = []*net.IPNet{netipNet(netip.MustParsePrefix("0.0.0.0/32")), netipNet(netip.MustParsePrefix("::/128"))}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("session CA: certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("session CA: certificate: %w", err)
	}
	return &CA{key: key, cert: cert, der: der, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM is the CA's certificate, PEM-encoded: what the session trusts.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Certificate returns the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Leaf returns a certificate for host (a name or an address), signed by
// the CA and kept for the next connection to host.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("session CA: leaf key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("session CA: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    ca.cert.NotBefore,
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, a.AsSlice())
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("session CA: leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.der}, PrivateKey: key}
	if len(ca.leaves) >= maxLeaves {
		// A wildcard entry lets a program ask for many names: the cache
		// starts over rather than grow without bound.
		clear(ca.leaves)
	}
	ca.leaves[host] = c
	return c, nil
}

// systemRootFiles are where Linux distributions keep their CA bundle (the
// list crypto/x509 reads).
var systemRootFiles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// TrustBundle is the PEM bundle a session's programs trust: the system's
// roots (tandem's SSL_CERT_FILE, else the distribution's bundle) followed
// by the session's CA.
func (ca *CA) TrustBundle() []byte {
	var buf bytes.Buffer
	files := systemRootFiles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = []string{f}
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			buf.Write(b)
			if !bytes.HasSuffix(b, []byte("\n")) {
				buf.WriteByte('\n')
			}
			break
		}
	}
	buf.Write(ca.CertPEM())
	return buf.Bytes()
}

// netipNet converts p for x509's name constraints.
func netipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
