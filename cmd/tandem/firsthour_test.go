package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestOwnFilesInsideWorkspaceRefused: a tandem.yaml, a key file or the
// data dir inside a workspace that sessions can write is refused at
// start, and the message says which file, which workspace and why.
func TestOwnFilesInsideWorkspaceRefused(t *testing.T) {
	tests := []struct {
		name string
		yaml string   // tandem.yaml, written in the workspace dir unless beside
		args []string // more flags; {ws} is the workspace
		want []string
	}{
		{name: "tandem.yaml in the workspace", yaml: "targets:\n  - {name: app, kind: local, workspace: .}\n",
			want: []string{"tandem's config file {ws}/tandem.yaml lies inside the workspace {ws} of local target \"app\", which its sessions can write",
				"an agent could rewrite it", "Move it outside {ws}"}},
		{name: "ssh key in the workspace", yaml: "targets:\n  - {name: app, kind: local, workspace: {ws}}\n  - {name: prod, kind: ssh, host: h, user: u, keyFile: {ws}/id_ed25519}\n",
			want: []string{"tandem's ssh key of target prod (keyFile) {ws}/id_ed25519 lies inside the workspace {ws}"}},
		{name: "a credential's secret file in the workspace", yaml: "targets:\n  - {name: app, kind: local, workspace: {ws}, network: {allow: [api.test], credentials: [{name: api, host: api.test, value: \"Bearer {secret}\", secretFile: {ws}/id_ed25519}]}}\n",
			want: []string{"tandem's secret file of target app's credential api (network.credentials secretFile) {ws}/id_ed25519 lies inside the workspace {ws}"}},
		{name: "data dir in the workspace", yaml: "targets:\n  - {name: app, kind: local, workspace: {ws}}\n", args: []string{"--data-dir", "{ws}/state"},
			want: []string{"covers tandem's data dir {ws}/state", "read or rewrite tandem's own state"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, beside := t.TempDir(), t.TempDir()
			ws, _ = filepath.EvalSymlinks(ws)
			fill := func(s string) string { return strings.ReplaceAll(s, "{ws}", ws) }
			if err := os.WriteFile(filepath.Join(ws, "id_ed25519"), []byte("key"), 0o600); err != nil {
				t.Fatal(err)
			}
			dir := beside
			if strings.Contains(tc.yaml, "workspace: .") {
				dir = ws
			}
			p := filepath.Join(dir, "tandem.yaml")
			if err := os.WriteFile(p, []byte(fill(tc.yaml)), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"serve", "--config", p, "--web", "127.0.0.1:0", "--data-dir", filepath.Join(beside, "state")}
			for _, a := range tc.args {
				args = append(args, fill(a))
			}
			out, err := tandemCLI(t, args...)
			if err == nil {
				t.Fatalf("tandem started:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, fill(w)) {
					t.Errorf("the refusal does not say %q:\n%s", fill(w), out)
				}
			}
		})
	}
}

// TestSixMistakesOneRun: tandem serve on a config with six mistakes of
// different kinds lists all six in one run, each with its key.
func TestSixMistakesOneRun(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "project")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tandem.yaml")
	yaml := `targets:
  - name: app
    kind: local
    workspace: project
    sandbox: landlock
    netwrok: false
  - name: db
    kind: ssh
    host: db.internal
    user: deploy
    port: twenty
    useAgent: true
  - name: web
    kind: ssh
    host: web.internal
    user: deploy
    port: 70000
    keyFile: missing_key
limits:
  idleTimeout: soon
policy:
  mode: ask
  rules:
    - {command: "git push*", decision: maybe}
`
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := tandemCLI(t, "serve", "--config", p, "--web", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "state"))
	if err == nil {
		t.Fatalf("tandem started on a config with six mistakes:\n%s", out)
	}
	for _, w := range []string{
		"line 6: targets[0].netwrok: unknown key; did you mean network?",
		`line 11: targets[1].port: "twenty" is not a whole number`,
		"targets[2].port: must be 1-65535, got 70000",
		`targets[2].keyFile: "` + dir + `/missing_key" does not exist`,
		`line 20: limits.idleTimeout: "soon" is not a duration`,
		`policy.rules[0].decision: must be allow, deny, ask or forward (or yes, no), got "maybe"`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the run does not list %q:\n%s", w, out)
		}
	}
}

// TestHTTPBusyPortAndMintLine: serve --http's start line says how to mint
// a token, and the command it prints mints one that this tandem accepts;
// a second serve --http on the same (now busy) port exits non-zero
// naming the port, instead of listening somewhere its clients never look.
func TestHTTPBusyPortAndMintLine(t *testing.T) {
	ws := t.TempDir()
	s := startHTTP(t, httpOpts{config: "targets:\n  - {name: build, kind: local, workspace: " + ws + "}\n"})
	m := regexp.MustCompile(`mint one for a working day: (tandem token issue [^)\n]*)\)`).FindStringSubmatch(s.log())
	if m == nil {
		t.Fatalf("the start line does not say how to mint a token:\n%s", s.log())
	}
	mint := strings.Fields(m[1])
	want := []string{"tandem", "token", "issue", "--config", s.config, "--data-dir", s.dataDir, "--tenant", "default", "--actor"}
	if len(mint) != len(want)+3 || !slices.Equal(mint[:len(want)], want) || !slices.Equal(mint[len(want)+1:], []string{"--ttl", "8h"}) {
		t.Fatalf("mint line %q, want %q ACTOR --ttl 8h", m[1], strings.Join(want, " "))
	}
	tok, err := exec.Command(binary, mint[1:]...).Output()
	if err != nil {
		t.Fatalf("the printed mint command fails: %v", err)
	}
	c := s.client(t, strings.TrimSpace(string(tok)))
	mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "s1", "target": "build"}))

	addr := strings.TrimPrefix(s.base, "http://")
	_, port, _ := net.SplitHostPort(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	second := t.TempDir()
	out, err := exec.CommandContext(ctx, binary, "serve", "--http", addr, "--data-dir", second, "--workspace", ws).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("a second serve --http %s is still running after 30 s (it moved to another port?):\n%s", addr, out)
	}
	if err == nil || !strings.Contains(string(out), "port "+port+" is in use") {
		t.Fatalf("serve --http on a busy port: exit %v, output:\n%s\nwant a failure naming port %s", err, out, port)
	}
}

// TestInitThenServe: tandem init in an empty directory writes a commented
// tandem.yaml beside the project, outside it, that the real loader takes;
// it refuses to overwrite, and inside the project it writes to
// ~/.config/tandem instead. tandem serve --config on that file, driven by
// the TypeScript SDK's client as Claude Code would: connect, a git push
// that asks (the client declines), a command that runs.
func TestInitThenServe(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	dir, _ = filepath.EvalSymlinks(dir)
	project := filepath.Join(dir, "project")
	cfgPath := filepath.Join(dir, "tandem.yaml")
	initCLI := func(wd string, args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"init"}, args...)...)
		cmd.Dir = wd
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := initCLI(dir, "project")
	if err != nil {
		t.Fatalf("tandem init project: %v\n%s", err, out)
	}
	if want := "claude mcp add tandem -- " + binary + " serve --config " + cfgPath + "\n"; !strings.Contains(out, want) {
		t.Errorf("init does not print the client line %q:\n%s", want, out)
	}
	cfg, err := config.Load(cfgPath, home)
	if err != nil {
		t.Fatalf("the starter config does not load: %v", err)
	}
	if tg, ok := cfg.Target("local"); !ok || tg.Workspace != project || tg.Network.On || tg.Network.Proxied() || tg.Sandbox != "landlock" {
		t.Errorf("starter target: %+v, want a sandboxed local target at %s without network", tg, project)
	}
	if r := cfg.RedactFor(config.DefaultTenant, "local"); !slices.Contains(r.SecretFiles, ".env") {
		t.Errorf("starter redaction: %+v, want .env", r)
	}
	written, _ := os.ReadFile(cfgPath)
	if !strings.Contains(string(written), "\n# ") {
		t.Errorf("the starter config has no comments:\n%s", written)
	}
	for _, tc := range []struct {
		name, wd string
		args     []string
		want     string
	}{
		{"again", dir, []string{"project"}, cfgPath + " already exists; tandem init never overwrites"},
		{"into the workspace", dir, []string{"project", "--output", filepath.Join(project, "tandem.yaml")}, "lies inside the workspace " + project},
	} {
		if out, err := initCLI(tc.wd, tc.args...); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("init %s: exit %v, output %q; want a refusal saying %q", tc.name, err, out, tc.want)
		}
	}
	if again, _ := os.ReadFile(cfgPath); string(again) != string(written) {
		t.Error("a refused init changed the file")
	}
	if _, err := os.Stat(filepath.Join(project, "tandem.yaml")); err == nil {
		t.Error("init wrote into the workspace")
	}
	// From inside the project, the file goes to the user's config dir.
	out, err = initCLI(project)
	if inside := filepath.Join(home, ".config", "tandem", "project.yaml"); err != nil || !strings.Contains(out, "--config "+inside) {
		t.Errorf("init inside the project: %v\n%s\nwant the file at %s", err, out, inside)
	}

	c := startTSClientEnv(t, []string{`TANDEM_ELICIT={"action":"decline"}`}, "serve", "--config", cfgPath, "--web", "127.0.0.1:0", "--data-dir", t.TempDir())
	tok := str(c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_connect", "args": map[string]any{"name": "first", "target": "local"}}).Reply["sessionToken"])
	if tok == "" {
		t.Fatal("ssh_connect gave no session token")
	}
	exec := func(command string) map[string]any {
		return c.mustDo(t, map[string]any{"op": "call", "tool": "ssh_exec", "args": map[string]any{"sessionName": "first", "sessionToken": tok, "command": command}}).Reply
	}
	if r := exec("git push origin main"); r["error"] != "approval_denied" || r["decidedBy"] != "client" {
		t.Errorf("git push under the starter policy: %v, want it asked and declined by the client", r)
	}
	if msgs := c.mustDo(t, map[string]any{"op": "elicited"}).Messages; len(msgs) != 1 || !strings.Contains(msgs[0], "git push origin main") {
		t.Errorf("elicitations: %q, want one for the git push", msgs)
	}
	r := exec("echo hello > hello.txt && cat hello.txt")
	if res, _ := r["result"].(map[string]any); r["success"] != true || res["stdout"] != "hello\n" {
		t.Fatalf("a plain command under the starter policy: %v", r)
	}
	if b, err := os.ReadFile(filepath.Join(project, "hello.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("the command did not run in the workspace: %q %v", b, err)
	}
}

// TestKeyboardInteractiveWrongPassword: ssh_connect with a wrong password
// to an OpenSSH that offers publickey,keyboard-interactive answers
// auth_failed, not connect_failed ("unexpected message type 51").
func TestKeyboardInteractiveWrongPassword(t *testing.T) {
	d := testenv.SSHDConfig(t, "KbdInteractiveAuthentication yes\n")
	srv := startServer(t, serverOpts{})
	e := wantError(t, srv.call(t, "ssh_connect", map[string]any{"name": "kbd", "host": d.Host, "port": d.Port, "username": d.User, "password": "wrong"}), "auth_failed")
	if strings.Contains(str(e["message"]), "is it an SSH server") {
		t.Errorf("auth_failed that says the server may not speak SSH: %v", e)
	}
}

// TestReconnectHintNamesRealTarget: after the shell exits, the reply's
// reconnect example names the caller's one target (build), as a call that
// works as written, not a target "local" that this tandem does not have.
func TestReconnectHintNamesRealTarget(t *testing.T) {
	s := localSession(t, serverOpts{config: "targets:\n  - {name: build, kind: local, workspace: ws}\n"})
	for _, call := range []struct{ cmd, code string }{{"exit 3", "shell_exited"}, {"true", "session_ended"}} {
		msg := str(wantError(t, s.exec(t, call.cmd), call.code)["message"])
		if !strings.Contains(msg, `ssh_connect {"name":"my-session","target":"build"}`) || strings.Contains(msg, `"local"`) {
			t.Errorf("%s: the reconnect example does not name target build: %s", call.code, msg)
		}
	}
}

// TestServeHelpWorkspaceDefault: serve --help says what the code does
// for --workspace: it composes with --config, and without one the
// client's first MCP root comes before the current directory.
func TestServeHelpWorkspaceDefault(t *testing.T) {
	out, err := tandemCLI(t, "serve", "--help")
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	for _, want := range []string{"with --config, the workspace of its one local target", "the client's first MCP root, else the current directory"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help does not say %q:\n%s", want, out)
		}
	}
}

// TestConfigAndWorkspaceCompose: the README's client snippets carry
// --workspace; with --config added, the flag names the workspace of the
// file's one local target, and the file's policy still applies.
func TestConfigAndWorkspaceCompose(t *testing.T) {
	project := t.TempDir()
	project, _ = filepath.EvalSymlinks(project)
	cfg := "targets:\n  - {name: app, kind: local, workspace: ws}\npolicy:\n  mode: allow\n  rules:\n    - {command: \"rm -rf *\", decision: deny}\n"
	s := startServer(t, serverOpts{config: cfg, args: []string{"--workspace", project}})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "c", "target": "app"}))["sessionToken"])
	se := sess{s, "c", tok}
	if r := result(t, se.exec(t, "pwd")); r["stdout"] != project+"\n" {
		t.Errorf("pwd %v, want the --workspace %s", r["stdout"], project)
	}
	wantError(t, se.exec(t, "rm -rf x"), "policy_denied")
}

// TestNewcomerHintKeepsBothFlags: the line a person running serve by hand
// is told to paste keeps --workspace beside --config, now that they
// compose.
func TestNewcomerHintKeepsBothFlags(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "project")
	hint := newcomerHint("/opt/tandem", serveFlags{config: filepath.Join(dir, "tandem.yaml"), workspace: ws}, config.Default(ws), nil)
	if want := "claude mcp add tandem -- /opt/tandem serve --config " + filepath.Join(dir, "tandem.yaml") + " --workspace " + ws + "\n"; !strings.Contains(hint, want) {
		t.Errorf("hint %q, want the line %q", hint, want)
	}
}
