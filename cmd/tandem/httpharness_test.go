package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// httpServer is one `tandem serve --http` process.
type httpServer struct {
	url     string // the MCP endpoint, as tandem printed it
	base    string // scheme://host:port
	dataDir string
	config  string // path of its tandem.yaml
	home    string
	cmd     *exec.Cmd
	stderr  string // path of its stderr log
}

type httpOpts struct {
	config string   // tandem.yaml content
	args   []string // more flags for serve
	home   string
}

var endpointRE = regexp.MustCompile(`tandem: MCP endpoint (\S+)`)

// startHTTP spawns the built binary in HTTP mode and waits for the line
// that names its endpoint, as a person starting it would.
func startHTTP(t testing.TB, o httpOpts) *httpServer {
	t.Helper()
	if o.home == "" {
		o.home = t.TempDir()
	}
	s := &httpServer{home: o.home, dataDir: filepath.Join(o.home, "state"), config: filepath.Join(o.home, "tandem.yaml")}
	if err := os.WriteFile(s.config, []byte(o.config), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--http", "127.0.0.1:0", "--data-dir", s.dataDir, "--config", s.config, "--log-level", "debug"}, o.args...)
	s.cmd = exec.Command(binary, args...)
	s.cmd.Dir = o.home
	s.cmd.Env = []string{"HOME=" + o.home, "PATH=" + os.Getenv("PATH"), "USER=" + os.Getenv("USER"), "GORACE=" + os.Getenv("GORACE")}
	errf, err := os.CreateTemp(o.home, "stderr-*.log")
	if err != nil {
		t.Fatal(err)
	}
	s.stderr = errf.Name()
	s.cmd.Stderr = errf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-exited
		}
		_ = errf.Close()
		if t.Failed() {
			t.Logf("tandem stderr:\n%s", lastN(s.log(), 6000))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := endpointRE.FindStringSubmatch(s.log()); m != nil {
			s.url = m[1]
			s.base = strings.TrimSuffix(s.url, "/mcp")
			return s
		}
		select {
		case <-exited:
			t.Fatalf("tandem serve --http exited before serving: %s", s.log())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("tandem serve --http printed no endpoint in 30 s: %s", s.log())
		}
	}
}

func (s *httpServer) log() string {
	b, _ := os.ReadFile(s.stderr)
	return string(b)
}

// token mints a token with the real CLI, as an orchestrator would.
func (s *httpServer) token(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"token", "issue", "--config", s.config, "--data-dir", s.dataDir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("token issue %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// bearer adds a token to every request of a client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// client connects the go-sdk client over Streamable HTTP with a token.
func (s *httpServer) client(t testing.TB, token string) *mcptest.Client {
	t.Helper()
	return s.clientWith(t, token, http.DefaultTransport)
}

func (s *httpServer) clientWith(t testing.TB, token string, rt http.RoundTripper) *mcptest.Client {
	t.Helper()
	return s.clientOpts(t, token, rt, nil)
}

// clientOpts is clientWith with the client's own options.
func (s *httpServer) clientOpts(t testing.TB, token string, rt http.RoundTripper, o *sdk.ClientOptions) *mcptest.Client {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e-http", Version: "1"}, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.url,
		HTTPClient: &http.Client{Transport: bearer{token, rt}}}, nil)
	if err != nil {
		t.Fatalf("connect over HTTP: %v (stderr: %s)", err, lastN(s.log(), 3000))
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &mcptest.Client{CS: cs}
}

// insecureTLS trusts any certificate: for the test's own self-signed one.
func insecureTLS() http.RoundTripper {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own certificate
}

// selfSigned writes a fresh certificate for 127.0.0.1 and its key.
func selfSigned(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	return selfSignedFor(t)
}

// selfSignedFor writes a fresh certificate for 127.0.0.1 and the host
// names given, and its key.
func selfSignedFor(t testing.TB, names ...string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tandem test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: names, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
