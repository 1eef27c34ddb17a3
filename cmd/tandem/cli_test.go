package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestBadConfigFailsAtStart: tandem refuses to start on a bad tandem.yaml
// and says which file, which key and why.
func TestBadConfigFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ yaml, want string }{
		{"targets:\n  - {name: prod, kind: ssh, host: h, user: u, keyFile: k, port: 70000}\n", "targets[0].port: must be 1-65535, got 70000"},
		{"targets:\n  - {name: w, kind: local, workspace: /no/such/dir}\n", `targets[0].workspace: "/no/such/dir" is not an existing directory`},
		{"limits:\n  idleTimout: 5m\n", "line 2: limits.idleTimout: unknown key; did you mean idleTimeout?"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, "tandem.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := tandemCLI(t, "serve", "--config", p, "--data-dir", filepath.Join(dir, "state"))
		if err == nil || !strings.Contains(out, p) || !strings.Contains(out, tc.want) {
			t.Errorf("config %q: exit %v, output %q; want the file and %q", tc.yaml, err, out, tc.want)
		}
	}
	// A config that loads but names no target (the README's policy
	// examples alone) starts, and warns that nothing can be connected to.
	p := filepath.Join(dir, "policy-only.yaml")
	if err := os.WriteFile(p, []byte("policy:\n  mode: ask\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := tandemCLI(t, "serve", "--config", p, "--web", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "state2")); !strings.Contains(out, "no target is configured") {
		t.Errorf("a config without targets gave no warning:\n%s", out)
	}
	if out, err := tandemCLI(t, "version"); err != nil || !strings.HasPrefix(out, "tandem ") {
		t.Errorf("version: %v %q", err, out)
	}
}

// TestNewcomerHint: run by hand in a terminal, tandem serve says in one
// line that it speaks MCP over stdio and how to add it to a client, then
// waits as an MCP server does; Ctrl-D ends it. A client's pipe gets no
// such line.
func TestNewcomerHint(t *testing.T) {
	ws := t.TempDir()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ptmx.Close(); _ = tty.Close() })
	cmd := exec.Command(binary, "serve", "--web", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "state"), "--workspace", ws)
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	stderr, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stderr.Close() })
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, io.Discard, w
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	sc := bufio.NewScanner(stderr)
	var hint string
	for sc.Scan() {
		if strings.Contains(sc.Text(), "speaks MCP") && sc.Scan() {
			hint = sc.Text() // the command, on a line of its own to paste
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	want := "claude mcp add tandem -- " + binary + " serve --workspace " + ws
	if strings.TrimSpace(hint) != want {
		t.Fatalf("hint %q, want the line %q", hint, want)
	}
	select {
	case <-exited:
		t.Fatalf("tandem exited instead of waiting: %v", waitErr)
	default:
	}
	if _, err := ptmx.Write([]byte{4}); err != nil { // Ctrl-D: end of input
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("tandem after Ctrl-D: %v", waitErr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("tandem did not end on Ctrl-D")
	}

	srv := startServer(t, serverOpts{})
	mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{}))
	if strings.Contains(srv.log(), "speaks MCP") {
		t.Error("the hint was printed to an MCP client's pipe")
	}
}

// TestSandboxCheck: `tandem sandbox` is the troubleshooting step for
// sandbox_unavailable. On this kernel it reports the ABI it found; a
// kernel without Landlock gets the refusal and what to do.
func TestSandboxCheck(t *testing.T) {
	out, err := exec.Command(binary, "sandbox").CombinedOutput()
	if err != nil {
		testenv.Missing(t, "Landlock is not available here (tandem sandbox: %v)\n%s", err, out)
	}
	abi := sandbox.Describe(sandbox.NetNamespace).LandlockABI
	for _, want := range []string{fmt.Sprintf("Landlock ABI %d: sandboxed local sessions can run", abi), "network:      namespace", "tcp:          no way out", "not enforced:", "exec judging: available"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("tandem sandbox lacks %q:\n%s", want, out)
		}
	}
	// Where namespaces are refused (here: turned off), the fallback and why.
	cmd := exec.Command(binary, "sandbox")
	cmd.Env = append(os.Environ(), "TANDEM_NETNS=off")
	fb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tandem sandbox with TANDEM_NETNS=off: %v\n%s", err, fb)
	}
	for _, want := range []string{"network:      seccomp", "no network namespace: network namespaces are turned off", "udp:          denied: a seccomp filter"} {
		if !strings.Contains(string(fb), want) {
			t.Errorf("tandem sandbox with TANDEM_NETNS=off lacks %q:\n%s", want, fb)
		}
	}
	refused := sandboxReport(sandbox.Enforcement{TCP: "not enforceable"}, sandbox.ErrUnsupported, fmt.Errorf("%w: no user_notif", execguard.ErrUnavailable))
	for _, want := range []string{"refused on this kernel", "sandbox: none", "exec judging: not available: kernel cannot judge execs: no user_notif", "sandboxed local targets are refused"} {
		if !strings.Contains(refused, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, refused)
		}
	}
}

// TestNewcomerHintUnderGoRun: under go run the binary is a throwaway, so
// the hint builds one to keep and adds that; the line pastes into bash.
func TestNewcomerHintUnderGoRun(t *testing.T) {
	ws := t.TempDir()
	cfg := config.Default(ws)
	hint := newcomerHint("/tmp/go-build123/b001/exe/tandem", serveFlags{}, cfg, nil)
	lines := strings.Split(hint, "\n")
	if len(lines) < 2 {
		t.Fatalf("hint %q has no command line", hint)
	}
	cmd := strings.TrimSpace(lines[1])
	want := "go build -o $HOME/.local/bin/tandem ./cmd/tandem && claude mcp add tandem -- $HOME/.local/bin/tandem serve --workspace " + ws
	if cmd != want {
		t.Fatalf("command %q, want %q", cmd, want)
	}
	if out, err := exec.Command("bash", "-n", "-c", cmd).CombinedOutput(); err != nil {
		t.Fatalf("the line does not parse as bash: %v %s", err, out)
	}
}

// TestRevokeDashJTI: another issuer's jti may begin with '-'. As a bare
// argument it reads as a flag, and the error says how to pass it; after
// -- it is revoked.
func TestRevokeDashJTI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	out, err := tandemCLI(t, "token", "revoke", "-ZJMR2oKlfnsDQ7H1hoIZQ", "--data-dir", dir)
	if err == nil || !strings.Contains(out, "goes after --: tandem token revoke [flags] -- -JTI") {
		t.Errorf("a bare dash jti: exit %v, output %q", err, out)
	}
	out, err = tandemCLI(t, "token", "revoke", "--data-dir", dir, "--", "-ZJMR2oKlfnsDQ7H1hoIZQ")
	if err != nil || strings.TrimSpace(out) != "revoked -ZJMR2oKlfnsDQ7H1hoIZQ" {
		t.Errorf("a dash jti after --: exit %v, output %q", err, out)
	}
}
