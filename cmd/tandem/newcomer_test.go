package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeShellLine returns the first line of the README's sh blocks that
// contains want, without its trailing comment.
func readmeShellLine(t *testing.T, want string) string {
	t.Helper()
	for _, b := range readmeBlocks(t) {
		if b.lang != "sh" {
			continue
		}
		for _, line := range strings.Split(b.text, "\n") {
			if strings.Contains(line, want) {
				code, _, _ := strings.Cut(line, "   #")
				return strings.TrimSpace(code)
			}
		}
	}
	t.Fatalf("the README has no sh line with %q", want)
	return ""
}

// TestNewcomerQuickStart runs the README's quick start as a newcomer
// would, with the TypeScript SDK standing in for Claude Code: the build
// line as written, then the server line the README adds to the client,
// then connect, exec and disconnect. Then the HTTP recipe: the tenants
// config from the README, tandem serve --http, the token line as written,
// and the same calls over Streamable HTTP. A drift between the README and
// the code fails here.
func TestNewcomerQuickStart(t *testing.T) {
	home := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The newcomer's home is new, so the go command's own settings (which
	// live under the real one) come along explicitly.
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOSUMDB", "GOTOOLCHAIN", "GOFLAGS"} {
		env = append(env, k+"="+goEnv(t, k))
	}
	run := func(dir, line string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}

	build := readmeShellLine(t, "go build -o ~/.local/bin/tandem")
	run(repo, build)
	add := readmeShellLine(t, "claude mcp add tandem -- ")
	_, server, _ := strings.Cut(add, " -- ")
	argv := strings.Fields(strings.ReplaceAll(server, "~/", home+"/"))
	if err := os.MkdirAll(argv[len(argv)-1], 0o755); err != nil { // ~/src/myproject: the newcomer's project
		t.Fatal(err)
	}
	c := startTSClientCmd(t, []string{"HOME=" + home}, argv[0], argv[1:]...)
	calls(t, c, map[string]any{"name": "dev"})

	bin := filepath.Join(home, ".local", "bin", "tandem")
	// serveHTTP starts the README's serve line with the HTTP address
	// replaced by a free port, and returns the endpoint it names.
	serveHTTP := func(dir string, line string) string {
		t.Helper()
		argv := strings.Fields(strings.ReplaceAll(line, "~/", home+"/"))
		for i, a := range argv {
			if a == "127.0.0.1:8080" {
				argv[i] = "127.0.0.1:0"
			}
		}
		srv := exec.Command(bin, argv[1:]...)
		srv.Dir, srv.Env = dir, env
		stderr, err := srv.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
		endpoint := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stderr)
			re := regexp.MustCompile(`tandem: MCP endpoint (\S+)`)
			for sc.Scan() {
				if m := re.FindStringSubmatch(sc.Text()); m != nil {
					endpoint <- m[1]
				}
			}
		}()
		select {
		case url := <-endpoint:
			return url
		case <-time.After(60 * time.Second):
			t.Fatalf("%s named no endpoint", line)
		}
		return ""
	}
	mint := func(dir, line string) string {
		t.Helper()
		line = strings.Replace(line, "$(tandem ", "$("+bin+" ", 1)
		return strings.TrimSpace(run(dir, line+` && printf %s "$TOKEN"`))
	}

	// The HTTP recipe without a config: tenant default, its local target.
	url := serveHTTP(home, readmeShellLine(t, "tandem serve --http 127.0.0.1:8080 --workspace"))
	token := mint(home, readmeShellLine(t, "TOKEN=$(tandem token issue --tenant default"))
	h := startTSClientEnv(t, []string{"TANDEM_TOKEN=" + token}, "--http", url)
	calls(t, h, map[string]any{"name": "dev", "target": "local"})

	// The HTTP recipe with the README's tenants config.
	var tenants string
	for _, b := range readmeBlocks(t) {
		if b.lang == "yaml" && strings.HasPrefix(b.text, "tenants:") {
			tenants = b.text
		}
	}
	if tenants == "" {
		t.Fatal("the README has no tenants config")
	}
	cfg := writeREADMEConfig(t, tenants)
	dir := filepath.Dir(cfg)
	url = serveHTTP(dir, readmeShellLine(t, "tandem serve --http 127.0.0.1:8080 --config tandem.yaml"))
	token = mint(dir, readmeShellLine(t, "TOKEN=$(tandem token issue --config tandem.yaml"))
	h = startTSClientEnv(t, []string{"TANDEM_TOKEN=" + token}, "--http", url)
	calls(t, h, map[string]any{"name": "dev", "target": "build"})
}

// calls connects with params, runs one command and disconnects, through
// a client.mjs client.
func calls(t *testing.T, c *tsClient, params map[string]any) {
	t.Helper()
	req := map[string]any{"op": "connect"}
	for k, v := range params {
		req[k] = v
	}
	tok := c.mustDo(t, req).Token
	session := map[string]any{"sessionName": params["name"], "sessionToken": tok}
	exec := map[string]any{"command": "echo hello from the quick start"}
	for k, v := range session {
		exec[k] = v
	}
	r := c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_exec", "args": exec}).Reply
	if res, _ := r["result"].(map[string]any); res["stdout"] != "hello from the quick start\n" {
		t.Fatalf("ssh_exec: %v", r)
	}
	if r := c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_disconnect", "args": session}).Reply; r["success"] != true {
		t.Fatalf("ssh_disconnect: %v", r)
	}
}

func goEnv(t *testing.T, key string) string {
	t.Helper()
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
