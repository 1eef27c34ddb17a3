package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// tokenFront serves, over TLS with a certificate for names, the plain
// registry at target to requests that bring "Bearer token", and counts
// the requests with and without it. npm's packument names its tarballs
// by the Host it was asked under, with http://: the front makes that
// https://.
type tokenFront struct {
	port          int
	certFile      string
	mu            sync.Mutex
	with, without int
}

func newTokenFront(t *testing.T, target, token string, names ...string) *tokenFront {
	t.Helper()
	f := &tokenFront{}
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Del("Accept-Encoding")
		},
		ModifyResponse: func(r *http.Response) error {
			if !strings.Contains(r.Header.Get("Content-Type"), "json") {
				return nil
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return err
			}
			b = bytes.ReplaceAll(b, []byte(`"http://`), []byte(`"https://`))
			r.Body = io.NopCloser(bytes.NewReader(b))
			r.ContentLength = int64(len(b))
			r.Header.Set("Content-Length", strconv.Itoa(len(b)))
			return nil
		},
	}
	certFile, keyFile := selfSignedFor(t, names...)
	f.certFile = certFile
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.Header.Get("Authorization") == "Bearer "+token
		f.mu.Lock()
		if ok {
			f.with++
		} else {
			f.without++
		}
		f.mu.Unlock()
		if !ok {
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.ServeTLS(ln, certFile, keyFile) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.port = portOf(t, ln.Addr())
	return f
}

func (f *tokenFront) counts() (with, without int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.with, f.without
}

// TestCredentialsPackageManagers: go mod download from a module proxy and
// npm install from a private registry, both over HTTPS and both wanting a
// token that is only in tandem's config (an operator's file), succeed from
// a sandboxed session with no flag; the registries saw the token on every
// request.
func TestCredentialsPackageManagers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go: %v", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Missing(t, "npm: %v", err)
	}
	const token = "npm_and_go_token_0123456789abcdef"
	gp := testenv.GoProxy(t, testenv.GoModule{Path: "example.com/private", Version: "v1.0.0", Files: map[string]string{"p.go": "package private\n\nconst P = \"fetched with the operator's token\"\n"}})
	np := testenv.NPMRegistry(t, testenv.NPMPackage{Name: "tandem-private", Version: "1.0.0", Files: map[string]string{"index.js": "module.exports = 'installed with the operator\\'s token';\n"}})
	gf := newTokenFront(t, gp.URL, token, "goproxy.test")
	nf := newTokenFront(t, np.URL, token, "npm.test")
	secretDir := t.TempDir()
	tokenFile := filepath.Join(secretDir, "registry.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["goproxy.test:%d", "npm.test:%d"], hosts: {goproxy.test: 127.0.0.1, npm.test: 127.0.0.1}, credentials: [`+
			`{name: goproxy, host: goproxy.test, value: "Bearer {secret}", secretFile: %s, caFile: %s},`+
			`{name: npm, host: npm.test, value: "Bearer {secret}", secretFile: %s, caFile: %s}]}`,
			gf.port, nf.port, tokenFile, gf.certFile, tokenFile, nf.certFile),
	}, "")
	s := connectTo(t, startServer(t, serverOpts{dir: ws, config: cfg}), "dev", "pm")

	goCmd := fmt.Sprintf("(%s telemetry off && mkdir -p gomod && cd gomod && printf 'module m\\n\\ngo 1.21\\n' > go.mod && "+
		"GOPROXY=https://goproxy.test:%d GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local %s mod download -json example.com/private@v1.0.0 && "+
		"cat \"$(%s env GOMODCACHE)/example.com/private@v1.0.0/p.go\")", goBin, gf.port, goBin, goBin)
	res := result(t, s.exec(t, goCmd, 120))
	if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "fetched with the operator's token") {
		t.Fatalf("go mod download: %v", res)
	}
	npmCmd := fmt.Sprintf("(mkdir -p npmproj && cd npmproj && echo '{}' > package.json && "+
		"npm install --registry https://npm.test:%d/ --no-audit --no-fund --no-update-notifier tandem-private && node -p \"require('tandem-private')\")", nf.port)
	res = result(t, s.exec(t, npmCmd, 120))
	if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "installed with the operator's token") {
		t.Fatalf("npm install: %v", res)
	}
	for name, f := range map[string]*tokenFront{"go proxy": gf, "npm registry": nf} {
		if with, without := f.counts(); with == 0 || without != 0 {
			t.Errorf("the %s saw %d requests with the token and %d without", name, with, without)
		}
	}
	if out := strings.TrimSpace(str(result(t, s.exec(t, fmt.Sprintf(`t=%s; grep -rqF "$t" "$(dirname "$HOME")" "$OLDPWD" . 2>/dev/null && echo LEAK; env | grep -qF "$t" && echo LEAK; echo checked`, token), 30))["stdout"])); out != "checked" {
		t.Fatalf("the token is in the session: %q", out)
	}
}
