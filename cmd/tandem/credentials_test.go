package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// apiServer is a TLS API of the test's, with a certificate of its own
// (the credential's caFile), that wants a bearer token and echoes it
// back in a header and its body.
type apiServer struct {
	port     int
	certFile string
	mu       sync.Mutex
	seen     []string // "METHOD path Authorization Host Proto"
}

func newAPIServer(t *testing.T, token string) *apiServer {
	t.Helper()
	a := &apiServer{}
	certFile, keyFile := selfSignedFor(t, "api.test", "other.test")
	a.certFile = certFile
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		a.mu.Lock()
		a.seen = append(a.seen, r.Method+" "+r.URL.Path+" "+auth+" "+r.Host+" "+r.Proto)
		a.mu.Unlock()
		if auth != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Echo", auth)
		fmt.Fprintf(w, "hello %s, you sent %s\n", r.URL.Path, auth)
	})}
	go func() { _ = srv.ServeTLS(ln, certFile, keyFile) }()
	t.Cleanup(func() { _ = srv.Close() })
	a.port = portOf(t, ln.Addr())
	return a
}

func (a *apiServer) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

// TestCredentialsNeverInSession: a sandboxed session calls an API whose
// bearer token is only in an operator's file named by the target's
// network.credentials. curl, Python (requests and urllib), Node and Go
// succeed with no flag (the session trusts its CA through its bundle),
// and the server, which offers HTTP/2, sees the token over HTTP/2; the
// token is in no variable, no file of the session's home or
// run dir, and comes back redacted where the server echoes it. Requests
// the entry's methods and paths do not allow, one that brings its own
// Authorization, and fronting (by Host, by TLS name) are refused with the
// reason in the reply and never reach the server. The session CA's key
// is in no file of the data dir or run dir.
func TestCredentialsNeverInSession(t *testing.T) {
	var tb [20]byte
	if _, err := rand.Read(tb[:]); err != nil {
		t.Fatal(err)
	}
	token := "tok_" + hex.EncodeToString(tb[:])
	api := newAPIServer(t, token)
	secretDir := t.TempDir()
	tokenFile := filepath.Join(secretDir, "api.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	port := strconv.Itoa(api.port)
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: [{host: "api.test:%s", methods: [GET], paths: ["/repos/acme/*"]}], hosts: {api.test: 127.0.0.1},`+
			` credentials: [{name: api, host: api.test, value: "Bearer {secret}", secretFile: %s, caFile: %s}]}`, port, tokenFile, api.certFile),
	}, "")
	buildGoGet(t, filepath.Join(ws, "goget"))
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	s := connectTo(t, srv, "dev", "creds")
	base := "https://api.test:" + port

	// The session's programs get the token nowhere.
	leak := fmt.Sprintf(`t=%s; run=$(dirname "$HOME"); for f in /proc/self/environ $(find "$run" -type f); do grep -qF "$t" "$f" 2>/dev/null && echo "LEAK $f"; done; `+
		`env | grep -qF "$t" && echo "LEAK env"; tr '\0' '\n' </proc/$$/environ | grep -qF "$t" && echo "LEAK shell environ"; echo checked`, token)
	if out := strings.TrimSpace(str(result(t, s.exec(t, leak, 30))["stdout"])); out != "checked" {
		t.Fatalf("the token is in the session: %q", out)
	}

	tests := []struct {
		name, cmd string
		ok        bool   // the command succeeds
		stdout    string // in its output
		reason    string // a refusal's reason in networkRefused
		method    string
		reached   bool // the server saw a request
	}{
		{"curl gets the bearer", "curl -sS -f -D - " + base + "/repos/acme/x", true, "hello /repos/acme/x", "", "", true},
		{"curl over HTTP/2", "curl -sS -f --http2 -o /dev/null -w 'HTTP/%{http_version} ' " + base + "/repos/acme/h2 && curl -sS --http2 " + base + "/repos/acme/h2", true, "HTTP/2 hello /repos/acme/h2", "", "", true},
		// requests (python3-requests, .ci/deps): its own CA bundle unless
		// REQUESTS_CA_BUNDLE names the session's.
		{"python requests", `python3 -c 'import requests,sys; r = requests.get(sys.argv[1]); r.raise_for_status(); print(r.text)' ` + base + "/repos/acme/py", true, "hello /repos/acme/py", "", "", true},
		{"python requests without the bundle's variables fails", `env -u REQUESTS_CA_BUNDLE -u CURL_CA_BUNDLE python3 -c 'import requests,sys; requests.get(sys.argv[1])' ` + base + "/repos/acme/py", false, "", "", "", false},
		{"python urllib, default context", `python3 -c 'import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1]).read().decode())' ` + base + "/repos/acme/urllib", true, "hello /repos/acme/urllib", "", "", true},
		{"node, default trust", nodeGet, true, "hello /repos/acme/node", "", "", true},
		{"go net/http, default trust", "./goget " + base + "/repos/acme/go", true, "hello /repos/acme/go", "", "", true},
		{"POST is refused", "curl -sS -f -X POST " + base + "/repos/acme/x", false, "", "method POST is not one of GET", "POST", false},
		{"another path is refused", "curl -sS -f " + base + "/repos/other/x", false, "", "path /repos/other/x is not under /repos/acme/*", "GET", false},
		{"its own Authorization is refused", "curl -sS -f -H 'Authorization: Bearer mine' " + base + "/repos/acme/x", false, "", "brings its own Authorization header", "GET", false},
		{"fronting by Host is refused", "curl -sS -f -H 'Host: other.test' " + base + "/repos/acme/x", false, "", "domain fronting", "GET", false},
		{"fronting by TLS name is refused", "curl -sS -f --connect-to other.test:" + port + ":api.test:" + port + " -H 'Host: api.test:" + port + "' https://other.test:" + port + "/repos/acme/x", false, "", "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := strings.ReplaceAll(tc.cmd, "$BASE", base)
			before := len(api.requests())
			r := s.exec(t, cmd, 40)
			res := result(t, r)
			whole, _ := json.Marshal(r)
			if strings.Contains(string(whole), token) {
				t.Fatalf("the reply holds the token: %s", whole)
			}
			if tc.ok != (res["exitCode"] == 0.0) || !strings.Contains(str(res["stdout"]), tc.stdout) {
				t.Fatalf("reply %s", whole)
			}
			seen := api.requests()[before:]
			if tc.reached != (len(seen) > 0) {
				t.Fatalf("the server saw %q", seen)
			}
			for _, q := range seen {
				if !strings.Contains(q, "Bearer "+token) {
					t.Fatalf("the server saw a request without the token: %q", q)
				}
			}
			if tc.ok {
				conns, _ := res["connections"].([]any)
				if len(conns) == 0 || !strings.Contains(fmt.Sprint(conns), "credential:api") || !strings.Contains(fmt.Sprint(conns), "inspected:true") {
					t.Errorf("connections %v: want the inspected one naming credential api", conns)
				}
				return
			}
			if tc.reason == "" {
				return
			}
			refused, _ := res["networkRefused"].([]any)
			if len(refused) == 0 {
				t.Fatalf("no networkRefused in %s", whole)
			}
			got, _ := refused[0].(map[string]any)
			if !strings.Contains(str(got["reason"]), tc.reason) || str(got["method"]) != tc.method || got["host"] != "api.test" {
				t.Errorf("networkRefused[0] %v, want %s refused saying %q", got, tc.method, tc.reason)
			}
			if tc.method != "" && !strings.Contains(str(res["stderr"])+str(res["stdout"]), "403") {
				t.Errorf("curl should see the proxy's 403: %s", whole)
			}
		})
	}
	// The host offers h2 (net/http's ServeTLS): the proxy spoke it.
	for _, q := range api.requests() {
		if !strings.HasSuffix(q, " HTTP/2.0") {
			t.Errorf("the proxy spoke other than HTTP/2 to a host that offers it: %q", q)
		}
	}

	// The echo came back redacted: curl -D - printed the X-Echo header and
	// the body, both holding the token.
	r := result(t, s.exec(t, "curl -sS -D - "+base+"/repos/acme/echo", 30))
	if out := str(r["stdout"]); strings.Contains(out, token) || strings.Count(out, "[REDACTED:") < 2 {
		t.Errorf("the echoed token is not redacted twice: %q", out)
	}

	// The audit names the credential of the allowed tunnels and the
	// method and path of a refused request; no record holds the token,
	// not even the tool calls of the test's own commands that typed it.
	audit, err := tandemCLI(t, "audit", "tail", "--data-dir", srv.dataDir, "--json", "-n", "100000")
	if err != nil {
		t.Fatalf("audit tail: %v\n%s", err, audit)
	}
	var named, refusedPost bool
	for _, line := range strings.Split(strings.TrimSpace(audit), "\n") {
		var rec struct {
			Event, Outcome string
			Args           map[string]any
		}
		if strings.Contains(line, token) {
			t.Errorf("an audit record holds the token: %s", line)
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Event != "network" {
			continue
		}
		named = named || rec.Outcome == "allowed" && rec.Args["credential"] == "api"
		refusedPost = refusedPost || rec.Outcome == "refused" && rec.Args["method"] == "POST" && rec.Args["path"] == "/repos/acme/x"
	}
	if !named || !refusedPost {
		t.Errorf("audit (credential named %v, refused POST %v):\n%s", named, refusedPost, audit)
	}

	// The session CA's key is in no file of the data dir or the run dir.
	home := str(result(t, s.exec(t, "echo $HOME", 10))["stdout"])
	runDir := filepath.Dir(home)
	bundle, err := os.ReadFile(filepath.Join(runDir, "ca-bundle.pem"))
	if err != nil {
		t.Fatal(err)
	}
	var caPub *ecdsa.PublicKey
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && strings.HasPrefix(c.Subject.CommonName, "tandem session CA") {
			caPub, _ = c.PublicKey.(*ecdsa.PublicKey)
		}
	}
	if caPub == nil {
		t.Fatal("the session's bundle holds no session CA")
	}
	for _, dir := range []string{srv.dataDir, runDir} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			if keyOf(b, caPub) {
				t.Errorf("%s holds the session CA's private key", p)
			}
			return nil
		})
	}

	// Each command's durable row names the credential of its inspected
	// connection and the method and path of a refused request.
	_ = srv.cs.Close() // closes stdin and waits for the process: every row is written
	st, err := sqlite.Open(context.Background(), srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rowNamed, rowRefused bool
	for _, r := range auditRecords(t, srv.dataDir) {
		if r.Event != "session_start" {
			continue
		}
		cmds, err := st.Commands(context.Background(), r.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			for _, conn := range c.Connections {
				rowNamed = rowNamed || conn.Credential == "api" && conn.Decision == "allowed"
				rowRefused = rowRefused || conn.Decision == "refused" && conn.Method == "POST" && conn.Path == "/repos/acme/x"
			}
		}
	}
	if !rowNamed || !rowRefused {
		t.Errorf("the history rows name the credential: %v, the refused POST: %v", rowNamed, rowRefused)
	}
}

// keyOf reports whether b, PEM or DER, holds the private key of pub.
func keyOf(b []byte, pub *ecdsa.PublicKey) bool {
	match := func(der []byte) bool {
		var k any
		if ek, err := x509.ParseECPrivateKey(der); err == nil {
			k = ek
		} else if pk, err := x509.ParsePKCS8PrivateKey(der); err == nil {
			k = pk
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		return ok && ek.PublicKey.Equal(pub)
	}
	if match(b) {
		return true
	}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return false
		}
		if match(blk.Bytes) {
			return true
		}
	}
}

// nodeGet fetches $BASE/repos/acme/node from Node through the session's
// proxy: Node 20's fetch ignores HTTPS_PROXY, so the script opens the
// CONNECT itself, then TLS with Node's default trust (no ca option): the
// session CA comes from NODE_EXTRA_CA_CERTS.
const nodeGet = `node -e '
const http = require("http"), tls = require("tls");
const p = new URL(process.env.HTTPS_PROXY), u = new URL(process.argv[1]);
const auth = Buffer.from(decodeURIComponent(p.username) + ":" + decodeURIComponent(p.password)).toString("base64");
http.request({host: p.hostname, port: p.port, method: "CONNECT", path: u.host, headers: {"Proxy-Authorization": "Basic " + auth}})
.on("connect", (res, sock) => {
  const s = tls.connect({socket: sock, servername: u.hostname}, () => {
    s.write("GET " + u.pathname + " HTTP/1.1\r\nHost: " + u.host + "\r\nConnection: close\r\n\r\n");
  });
  let out = ""; s.on("data", d => out += d); s.on("end", () => { process.stdout.write(out.split("\r\n\r\n")[1] || ""); });
  s.on("error", e => { console.error(e.message); process.exit(1); });
}).end();
' $BASE/repos/acme/node`

// buildGoGet builds, at out, a Go program that prints the body of a GET
// of its argument with net/http's defaults: HTTPS_PROXY from the
// environment, the system's roots (SSL_CERT_FILE). It connects from a
// thread other than the main one.
func buildGoGet(t *testing.T, out string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	src := t.TempDir()
	prog := `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
)

// The main goroutine keeps the main thread: the request is made from
// another thread, as a multi-threaded program's often is.
func init() { runtime.LockOSThread() }

func main() {
	done := make(chan int)
	go func() {
		runtime.LockOSThread()
		r, err := http.Get(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			done <- 1
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Print(string(b))
		if r.StatusCode != 200 {
			done <- 2
			return
		}
		done <- 0
	}()
	os.Exit(<-done)
}
`
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(prog), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "build", "-o", out, "main.go")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
}
