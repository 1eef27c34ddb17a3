package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestCredentialsGitClonePush: git http-backend behind a TLS server of
// the test (its certificate is the credential's caFile) wants a token as
// Basic auth; from a sandboxed session with no token anywhere, git clone
// and git push succeed through the proxy with no flag, and the server saw
// the token on every request.
func TestCredentialsGitClonePush(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is not on PATH: %v", err)
	}
	execPath, err := exec.Command(gitBin, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	var tb [20]byte
	if _, err := rand.Read(tb[:]); err != nil {
		t.Fatal(err)
	}
	token := "ghp_" + hex.EncodeToString(tb[:])

	root := t.TempDir()
	repo := filepath.Join(root, "repo.git")
	seed := filepath.Join(root, "seed")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", repo},
		{"-C", repo, "config", "http.receivepack", "true"},
		{"init", "-q", "-b", "main", seed},
		{"-C", seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "seed"},
		{"-C", seed, "push", "-q", repo, "main"},
	} {
		if b, err := exec.Command(gitBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	var mu sync.Mutex
	var seen []string
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	certFile, keyFile := selfSignedFor(t, "git.test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+fmt.Sprint(r.Header.Get("Authorization") == want))
		mu.Unlock()
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "token required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})}
	go func() { _ = srv.ServeTLS(ln, certFile, keyFile) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := strconv.Itoa(portOf(t, ln.Addr()))

	secretDir := t.TempDir()
	tokenFile := filepath.Join(secretDir, "forge.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["git.test:%s"], hosts: {git.test: 127.0.0.1},`+
			` credentials: [{name: forge, host: git.test, value: "Basic {x-access-token:secret}", secretFile: %s, caFile: %s}]}`, port, tokenFile, certFile),
	}, "")
	s := connectTo(t, startServer(t, serverOpts{dir: ws, config: cfg}), "dev", "git")
	url := "https://git.test:" + port + "/repo.git"
	cmd := "git clone -q " + url + " clone && cd clone && echo hi > f && git add f && " +
		"git -c user.name=a -c user.email=a@a commit -qm change && git push -q origin HEAD:main && echo pushed"
	r := s.exec(t, cmd, 45)
	res := result(t, r)
	if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "pushed") {
		t.Fatalf("clone and push: %v", r)
	}
	if out := strings.TrimSpace(str(result(t, s.exec(t, fmt.Sprintf(`t=%s; grep -rqF "$t" "$(dirname "$HOME")" . /proc/self/environ 2>/dev/null && echo LEAK; env | grep -qF "$t" && echo LEAK; echo checked`, token), 30))["stdout"])); out != "checked" {
		t.Fatalf("the token is in the session: %q", out)
	}
	log, err := exec.Command(gitBin, "-C", repo, "log", "--format=%s", "main").Output()
	if err != nil || !strings.HasPrefix(string(log), "change\n") {
		t.Fatalf("the push did not land: %q %v", log, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 4 {
		t.Fatalf("the server saw %q", seen)
	}
	for _, q := range seen {
		if !strings.HasSuffix(q, " true") {
			t.Errorf("a request without the token: %q (all: %q)", q, seen)
		}
	}
}
