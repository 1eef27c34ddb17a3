package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/store/sqlite"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestShellExitedReply: a command that ends the shell gets shell_exited with
// the status and the output so far, and the session is recorded as ended for
// that reason (issue 6 item 8).
func TestShellExitedReply(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		exit float64
	}{
		{"echo partial; exit 3", 3},
		{"echo partial; set -e; false", 1},
		{"echo partial; false || exit 1", 1},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			s := localSession(t, serverOpts{})
			e := wantError(t, s.exec(t, tc.cmd), "shell_exited")
			if e["exitCode"] != tc.exit || !strings.Contains(str(e["message"]), "shell exited") || !strings.Contains(str(e["message"]), "ssh_connect") {
				t.Errorf("reply: %v", e)
			}
			p, _ := e["partial"].(map[string]any)
			if p == nil || p["stdout"] != "partial\n" {
				t.Errorf("partial output: %v", e["partial"])
			}
			ended := wantError(t, s.exec(t, "true"), "session_ended")
			if ended["reason"] != "shell_exited" {
				t.Errorf("later call: %v", ended)
			}
		})
	}
}

// TestExactShapesThroughTandem: the commonest agent shapes, end to end in
// the sandbox (issue 6 item 7), and commands up to 1 MiB (item 11).
func TestExactShapesThroughTandem(t *testing.T) {
	s := localSession(t, serverOpts{})
	for _, tc := range []struct {
		cmd, stdout string
		exit        float64
	}{
		{"mkdir -p sub && touch sub/f && (cd sub && ls)", "f\n", 0},
		{"(echo a)", "a\n", 0},
		{"(echo a; exit 3)", "a\n", 3},
	} {
		res := result(t, s.exec(t, tc.cmd))
		if res["stdout"] != tc.stdout || res["exitCode"] != tc.exit {
			t.Errorf("%q: %v", tc.cmd, res)
		}
	}
	body := strings.Repeat(strings.Repeat("z", 1023)+"\n", 1000)
	res := result(t, s.exec(t, "cat > big <<'EOF'\n"+body+"EOF\nwc -c < big"))
	if strings.TrimSpace(str(res["stdout"])) != strconv.Itoa(len(body)) {
		t.Errorf("1 MB heredoc: %v", res)
	}
	e := wantError(t, s.exec(t, strings.Repeat("x", 1<<20+1)), "invalid_arguments")
	if !strings.Contains(str(e["message"]), strconv.Itoa(1<<20+1)) {
		t.Errorf("oversized command: %v", e)
	}
	wantError(t, s.exec(t, "echo a\x00b"), "invalid_arguments")
	mustOK(t, s.exec(t, "true"))
}

// rawServer is tandem over stdio driven by hand, so the test controls
// stdin's end.
type rawServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	id    int
}

func (r *rawServer) send(t *testing.T, method string, params any, notify bool) {
	t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if !notify {
		r.id++
		m["id"] = r.id
	}
	b, _ := json.Marshal(m)
	if _, err := r.stdin.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

// reply reads lines until the answer to the last request.
func (r *rawServer) reply(t *testing.T) map[string]any {
	t.Helper()
	for {
		line, err := r.out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("read reply: %v", err)
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["id"] == float64(r.id) {
			return m
		}
	}
}

// TestStdinEOFEndsStuckSessions: when the client goes away while a command
// is stuck, tandem ends the session and exits within the kill grace, and
// the command's process is gone (issue 6 item 15).
func TestStdinEOFEndsStuckSessions(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	cmd := exec.Command(binary, "serve", "--web", "127.0.0.1:0", "--data-dir", filepath.Join(home, "state"))
	cmd.Dir = ws
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	r := &rawServer{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	r.send(t, "initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}, false)
	r.reply(t)
	r.send(t, "notifications/initialized", map[string]any{}, true)
	r.send(t, "tools/call", map[string]any{"name": "ssh_connect", "arguments": map[string]any{"name": "s"}}, false)
	var connect map[string]any
	res := r.reply(t)["result"].(map[string]any)
	if err := json.Unmarshal([]byte(res["content"].([]any)[0].(map[string]any)["text"].(string)), &connect); err != nil {
		t.Fatal(err)
	}
	tok := connect["sessionToken"].(string)
	// A command that ignores Ctrl-C and SIGTERM and is still running, long
	// enough (70 KB) that staging it used to wedge the session for good.
	stuck := "trap '' INT TERM; echo $$ > stuck.pid; while :; do sleep 1; done #" + strings.Repeat("x", 70000)
	r.send(t, "tools/call", map[string]any{"name": "ssh_exec", "arguments": map[string]any{"sessionName": "s", "sessionToken": tok, "command": "bash -c " + strconv.Quote(stuck)}}, false)
	var pid int
	deadline := time.Now().Add(20 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(ws, "stuck.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the stuck command never started")
	}
	start := time.Now()
	_ = stdin.Close()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("tandem still running %v after its stdin ended", time.Since(start))
	}
	for testenv.Running(pid) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("the stuck command (pid %d) outlived tandem", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFoldedSecretKeysRefused: keys that only Unicode case folding would
// match to a parameter ("paſſword", "private\u212Aey") are refused, and the
// secret they carry is in no file tandem wrote (issue 6 item 3).
func TestFoldedSecretKeysRefused(t *testing.T) {
	pw := secret("pw-")
	ps := testenv.PasswordSSHD(t, "tester", pw)
	srv := startServer(t, serverOpts{})
	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"name": "a", "host": ps.Host, "port": ps.Port, "username": ps.User, "pa\u017f\u017fword": pw}, "pa\u017f\u017fword"},
		{map[string]any{"name": "b", "host": ps.Host, "port": ps.Port, "username": ps.User, "private\u212Aey": pw}, "private\u212Aey"},
		{map[string]any{"name": "c", "host": ps.Host, "port": ps.Port, "username": ps.User, "Password": pw}, "Password"},
	} {
		e := wantError(t, srv.call(t, "ssh_connect", tc.args), "invalid_arguments")
		if e["field"] != tc.field {
			t.Errorf("field %v, want %q", e["field"], tc.field)
		}
	}
	_ = srv.cs.Close()
	err := filepath.WalkDir(srv.home, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), pw) {
			t.Errorf("the secret is in %s", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInheritedFdsDoNotReachShell: a client that spawns tandem with extra
// open descriptors (a file, a TCP socket) does not hand them to the
// sandboxed shell (issue 6 item 2).
func TestInheritedFdsDoNotReachShell(t *testing.T) {
	file, err := os.CreateTemp(t.TempDir(), "leak-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	sock, err := conn.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	s := localSession(t, serverOpts{extraFiles: []*os.File{file, sock}})
	res := result(t, s.exec(t, `for fd in 3 4; do (echo x >&$fd) 2>/dev/null && echo open-$fd; done; echo done`))
	if res["stdout"] != "done\n" {
		t.Fatalf("inherited descriptors reached the shell: %v", res)
	}
	if b, _ := os.ReadFile(file.Name()); len(b) != 0 {
		t.Fatalf("the shell wrote %q to the inherited file", b)
	}
}

// TestDataDirNeverInSandbox: tandem refuses a chosen workspace that covers
// its data dir, naming both; with the implicit workspace it starts but
// refuses local sessions with the same explanation (issue 6 item 1).
func TestDataDirNeverInSandbox(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, ".local", "state", "tandem")
	cmd := exec.Command(binary, "serve", "--workspace", home, "--data-dir", data, "--web", "127.0.0.1:0")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), home) || !strings.Contains(string(out), data) || !strings.Contains(string(out), "--workspace") {
		t.Fatalf("serve --workspace $HOME: %v, %s", err, out)
	}
	// Implicit workspace: tandem started from $HOME.
	srv := startServer(t, serverOpts{dir: home, home: home})
	srv.dataDir = data
	e := wantError(t, srv.call(t, "ssh_connect", map[string]any{"name": "h"}), "sandbox_unavailable")
	if msg := str(e["message"]); !strings.Contains(msg, "--workspace") || !strings.Contains(msg, "data dir") {
		t.Fatalf("message: %q", msg)
	}
}

// TestSandboxReachesNoSharedTemp: a session cannot read /tmp, another
// session's TMPDIR, or tandem's data dir, and its own TMPDIR works.
func TestSandboxReachesNoSharedTemp(t *testing.T) {
	srv := startServer(t, serverOpts{})
	var toks [2]string
	for i, name := range []string{"a", "b"} {
		toks[i] = str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": name}))["sessionToken"])
	}
	a, b := sess{srv, "a", toks[0]}, sess{srv, "b", toks[1]}
	tmpA := strings.TrimSpace(str(result(t, a.exec(t, `echo secret > "$TMPDIR/f" && echo "$TMPDIR"`))["stdout"]))
	if tmpA == "" || strings.HasPrefix(tmpA, srv.dataDir) {
		t.Fatalf("TMPDIR of a: %q (data dir %s)", tmpA, srv.dataDir)
	}
	shm, err := os.CreateTemp("/dev/shm", "tandem-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(shm.Name()); shm.Close() })
	for _, probe := range []string{"cat " + tmpA + "/f", "ls /tmp", "ls " + srv.dataDir, "ls /var/tmp", "cat " + shm.Name()} {
		res := result(t, b.exec(t, probe))
		if res["exitCode"] == 0.0 {
			t.Errorf("session b ran %q: %v", probe, res)
		}
	}
}

// lockDB holds tandem.db's write lock from another connection, as another
// process would, until the returned func is called.
func lockDB(t *testing.T, dataDir string) func() {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dataDir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			_ = conn.Close()
			_ = db.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// TestAuditUnavailableRunsNothing: while the audit log cannot be written,
// a call runs nothing and says audit_unavailable, within its own timeout;
// with audit.onFailure: continue it runs and reports auditError (issue 6
// item 18).
func TestAuditUnavailableRunsNothing(t *testing.T) {
	for _, mode := range []string{"", "continue"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			o := serverOpts{}
			if mode != "" {
				o.config = "targets:\n  - name: local\n    kind: local\n    workspace: ws\naudit:\n  onFailure: " + mode + "\n"
				o.dir = t.TempDir()
			}
			s := localSession(t, o)
			dir := cwdOf(t, s)
			release := lockDB(t, s.srv.dataDir)
			start := time.Now()
			r := s.exec(t, "touch ran", 2)
			took := time.Since(start)
			_, statErr := os.Stat(filepath.Join(dir, "ran"))
			if mode == "" {
				wantError(t, r, "audit_unavailable")
				if statErr == nil {
					t.Error("the command ran although it could not be audited")
				}
				if took > 4*time.Second {
					t.Errorf("refused after %v; the call's timeout was 2s", took)
				}
			} else {
				mustOK(t, r)
				if r["auditError"] == nil || statErr != nil {
					t.Errorf("continue: %v (ran: %v)", r, statErr == nil)
				}
			}
			release()
			mustOK(t, s.exec(t, "true"))
		})
	}
}

// cwdOf is the session's working directory, where its files land.
func cwdOf(t *testing.T, s sess) string {
	t.Helper()
	info := mustOK(t, s.srv.call(t, "ssh_list_sessions", map[string]any{}))
	for _, x := range info["sessions"].([]any) {
		m := x.(map[string]any)
		if m["name"] == s.name {
			return str(m["cwd"])
		}
	}
	t.Fatalf("session %s not listed", s.name)
	return ""
}

// TestClientCancelInterrupts: notifications/cancelled for a running
// ssh_exec interrupts the command, the audit records "cancelled", and the
// session takes the next command (issue 6 item 14).
func TestClientCancelInterrupts(t *testing.T) {
	s := localSession(t, serverOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.srv.cs.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{
			"sessionName": s.name, "sessionToken": s.tok, "command": "echo started > started; sleep 60"}})
		done <- err
	}()
	dir := cwdOf(t, s)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	// The session is usable again within the cancel grace.
	deadline = time.Now().Add(15 * time.Second)
	for {
		r := s.exec(t, "echo next")
		if r["success"] == true {
			break
		}
		if r["error"] != "session_busy" || time.Now().After(deadline) {
			t.Fatalf("after cancel: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	db, err := sql.Open("sqlite", filepath.Join(s.srv.dataDir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var outcome string
	err = db.QueryRow(`SELECT outcome FROM audit WHERE tool = 'ssh_exec' AND args LIKE '%sleep 60%'`).Scan(&outcome)
	if err != nil || outcome != "cancelled" {
		t.Fatalf("audit outcome %q (%v), want cancelled", outcome, err)
	}
}

// TestFailureCodes enumerates the failure paths of ssh_connect and ssh_exec
// and asserts a specific code for each: internal_error is for tandem's own
// bugs only (issue 6 item 19).
func TestFailureCodes(t *testing.T) {
	d := testenv.SSHD(t)
	pw := testenv.PasswordSSHD(t, "tester", "right-password", "password")
	home := t.TempDir()
	srv := startServer(t, serverOpts{home: home})

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	notSSH, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notSSH.Close() })
	go func() {
		for {
			c, err := notSSH.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	notKey := filepath.Join(t.TempDir(), "not-a-key")
	if err := os.WriteFile(notKey, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherKey := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", otherKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	// The user's own known_hosts pins a different key for the pinned host,
	// and only an RSA key for the "other type" host.
	rsaKey := filepath.Join(t.TempDir(), "rsa")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", rsaKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	edPub, _ := os.ReadFile(otherKey + ".pub")
	rsaPub, _ := os.ReadFile(rsaKey + ".pub")
	pinned, otherType := testenv.SSHD(t), testenv.SSHD(t)
	kh := fmt.Sprintf("[127.0.0.1]:%d %s[127.0.0.1]:%d %s", pinned.Port, edPub, otherType.Port, rsaPub)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(kh), 0o600); err != nil {
		t.Fatal(err)
	}
	key := func(s *testenv.SSHDServer, extra map[string]any) map[string]any {
		m := map[string]any{"host": s.Host, "port": s.Port, "username": s.User, "keyFilePath": s.ClientKeyFile}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	n := 0
	connect := []struct {
		name string
		args map[string]any
		code string
	}{
		{"connection refused", map[string]any{"host": "127.0.0.1", "port": closedPort, "username": "x", "password": "y"}, "connect_failed"},
		{"DNS failure", map[string]any{"host": "no-such-host.invalid", "username": "x", "password": "y"}, "connect_failed"},
		{"not an SSH server", map[string]any{"host": "127.0.0.1", "port": notSSH.Addr().(*net.TCPAddr).Port, "username": "x", "password": "y"}, "connect_failed"},
		{"wrong password", map[string]any{"host": pw.Host, "port": pw.Port, "username": pw.User, "password": "wrong"}, "auth_failed"},
		{"key not authorized", key(d, map[string]any{"keyFilePath": otherKey}), "auth_failed"},
		{"not a key file", key(d, map[string]any{"keyFilePath": notKey}), "auth_failed"},
		{"missing key file", key(d, map[string]any{"keyFilePath": "/nonexistent/key"}), "auth_failed"},
		{"host key changed", key(pinned, nil), "host_key_rejected"},
		{"pinned key type not offered", key(otherType, nil), "host_key_rejected"},
		{"port 0", key(d, map[string]any{"port": 0}), "invalid_arguments"},
		{"port too large", key(d, map[string]any{"port": 70000}), "invalid_arguments"},
		{"negative port", key(d, map[string]any{"port": -1}), "invalid_arguments"},
		{"port not a number", key(d, map[string]any{"port": "22"}), "invalid_arguments"},
		{"no username", map[string]any{"host": d.Host, "port": d.Port, "keyFilePath": d.ClientKeyFile}, "invalid_arguments"},
		{"target and host", map[string]any{"target": "local", "host": d.Host}, "invalid_arguments"},
		{"unknown target", map[string]any{"target": "nope"}, "unknown_target"},
		{"bad name", map[string]any{"name": "no spaces allowed", "target": "local"}, "invalid_session_name"},
		{"unknown key", map[string]any{"target": "local", "sudo": true}, "invalid_arguments"},
	}
	for _, tc := range connect {
		t.Run("connect/"+tc.name, func(t *testing.T) {
			if _, ok := tc.args["name"]; !ok {
				n++
				tc.args["name"] = fmt.Sprintf("c%d", n)
			}
			e := wantError(t, srv.call(t, "ssh_connect", tc.args), tc.code)
			if str(e["message"]) == "" {
				t.Errorf("no message: %v", e)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(home, ".ssh", "known_hosts")); string(b) != kh {
		t.Errorf("the user's known_hosts was written:\n%s", b)
	}

	ok := mustOK(t, srv.call(t, "ssh_connect", key(d, map[string]any{"name": "ok"})))
	tok := str(ok["sessionToken"])
	if b, _ := os.ReadFile(filepath.Join(srv.dataDir, "known_hosts")); !strings.Contains(string(b), fmt.Sprintf("[127.0.0.1]:%d", d.Port)) {
		t.Errorf("the ad-hoc host was not pinned in tandem's own known_hosts: %q", b)
	}
	args := func(extra map[string]any) map[string]any {
		m := map[string]any{"sessionName": "ok", "sessionToken": tok, "command": "true"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	execs := []struct {
		name string
		args map[string]any
		code string
	}{
		{"no token", args(map[string]any{"sessionToken": ""}), "invalid_session_token"},
		{"wrong token", args(map[string]any{"sessionToken": "nope"}), "invalid_session_token"},
		{"unknown session", args(map[string]any{"sessionName": "nope"}), "invalid_session_token"},
		{"no command", args(map[string]any{"command": ""}), "invalid_arguments"},
		{"NUL in command", args(map[string]any{"command": "echo a\x00b"}), "invalid_arguments"},
		{"command too large", args(map[string]any{"command": strings.Repeat("x", 1<<20+1)}), "invalid_arguments"},
		{"timeout 0", args(map[string]any{"timeoutSeconds": 0}), "invalid_arguments"},
		{"timeout huge", args(map[string]any{"timeoutSeconds": 1e9}), "invalid_arguments"},
		{"timeout", args(map[string]any{"command": "sleep 2", "timeoutSeconds": 0.3}), "command_timeout"},
		{"busy", args(nil), "session_busy"},
	}
	for _, tc := range execs {
		t.Run("exec/"+tc.name, func(t *testing.T) {
			wantError(t, srv.call(t, "ssh_exec", tc.args), tc.code)
		})
	}
	// Pins are per name, case folded: LOCALHOST is localhost.
	lk := key(d, map[string]any{"name": "lower", "host": "localhost"})
	mustOK(t, srv.call(t, "ssh_connect", lk))
	lk = key(d, map[string]any{"name": "upper", "host": "LOCALHOST"})
	mustOK(t, srv.call(t, "ssh_connect", lk))
	b, _ := os.ReadFile(filepath.Join(srv.dataDir, "known_hosts"))
	if strings.Count(strings.ToLower(string(b)), fmt.Sprintf("[localhost]:%d", d.Port)) != 1 {
		t.Errorf("localhost pinned more than once:\n%s", b)
	}
}

// TestImplicitWorkspaceChosenOnPurpose: started from / or $HOME with no
// --workspace and no config, tandem serves but starts no local session,
// and says to pass --workspace; with --workspace it does, and the reply and
// the startup log name the workspace (issue 7 item 4).
func TestImplicitWorkspaceChosenOnPurpose(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct{ dir, why string }{
		{"/", "covers tandem's data dir"}, // every data dir is under /
		{home, "your home directory"},
		{"/usr/share", "a system directory"},
	} {
		// The data dir is outside home, so only the workspace's breadth refuses it.
		srv := startServer(t, serverOpts{dir: tc.dir, home: home, args: []string{"--data-dir", data}})
		e := wantError(t, srv.call(t, "ssh_connect", map[string]any{"name": "w"}), "sandbox_unavailable")
		if msg := str(e["message"]); !strings.Contains(msg, "--workspace") || !strings.Contains(msg, tc.why) {
			t.Errorf("from %s: %q", tc.dir, msg)
		}
		// The startup line lists the target as refused, not as serving.
		if log := srv.log(); !strings.Contains(log, "local (local, workspace "+tc.dir+", REFUSED: see the warning above)") {
			t.Errorf("from %s, the startup log does not mark the target refused:\n%s", tc.dir, lastN(log, 2000))
		}
	}
	project := t.TempDir()
	srv := startServer(t, serverOpts{dir: "/", home: home, args: []string{"--workspace", project}})
	r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "w"}))
	if r["workspace"] != project {
		t.Errorf("workspace in the reply: %v, want %s", r["workspace"], project)
	}
	if log := srv.log(); !strings.Contains(log, "workspace "+project) {
		t.Errorf("the startup log does not name the workspace:\n%s", lastN(log, 2000))
	}
}

// TestSandboxEnvironmentWorks: inside the sandbox the user's tools run from
// their PATH, nothing waits for an editor, and the project gains no dotfiles
// (issue 7 item 5).
func TestSandboxEnvironmentWorks(t *testing.T) {
	ws := t.TempDir()
	srv := startServer(t, serverOpts{dir: ws})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "env"}))["sessionToken"])
	s := sess{srv, "env", tok}
	for _, tc := range []struct {
		cmd, stdout string
	}{
		{"python3 -c 'print(6*7)'", "42\n"},
		{"cd \"$TMPDIR\" && printf 'package main\\nfunc main() {}\\n' > m.go && go build -o m m.go && ./m && echo built && cd - >/dev/null", "built\n"},
		{"echo $HOME | grep -c \"^$PWD\" || true", "0\n"},
	} {
		res := result(t, s.exec(t, tc.cmd, 60))
		if res["stdout"] != tc.stdout {
			t.Errorf("%s: %v", tc.cmd, res)
		}
	}
	// git commit without -m must not open an editor and hang.
	r := s.exec(t, "git init -q . && git -c user.email=a@b -c user.name=a commit --allow-empty", 20)
	if r["error"] == "command_timeout" {
		t.Fatalf("git commit without -m hung: %v", r)
	}
	if res := result(t, r); res["exitCode"] == 0.0 {
		t.Errorf("git commit with an empty message succeeded: %v", res)
	}
	mustOK(t, s.exec(t, "rm -rf .git && history -a; echo done"))
	mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": "env", "sessionToken": tok}))
	entries, _ := os.ReadDir(ws)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("the session left %s in the project", e.Name())
		}
	}
}

// TestUserRCSourced: a local session sources the user's real ~/.bashrc
// where the sandbox may read it (readOnly grants it), never a .bashrc that
// sits in the project; an rc the sandbox cannot read is skipped quietly.
func TestUserRCSourced(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("export FROM_USER_RC=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".bashrc"), []byte("export FROM_PROJECT=yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, target, want string
	}{
		{"granted", "readOnly: [" + filepath.Join(home, ".bashrc") + "]", "user=yes project=no\n"},
		{"not granted", "", "user=no project=no\n"},
		{"unsandboxed", "sandbox: none", "user=yes project=no\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := "targets:\n  - {name: local, kind: local, workspace: " + ws
			if tc.target != "" {
				cfg += ", " + tc.target
			}
			srv := startServer(t, serverOpts{home: home, config: cfg + "}\n"})
			tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "rc"}))["sessionToken"])
			res := result(t, sess{srv, "rc", tok}.exec(t, `echo "user=${FROM_USER_RC:-no} project=${FROM_PROJECT:-no}"`))
			if res["stdout"] != tc.want {
				t.Errorf("%v", res)
			}
		})
	}
}
