package testenv_test

import (
	"bytes"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/testenv"
)

func dial(t *testing.T, addr, user string, hostKey ssh.PublicKey, auth ...ssh.AuthMethod) *ssh.Client {
	t.Helper()
	c, err := ssh.Dial("tcp", addr, &ssh.ClientConfig{
		User:            user,
		Auth:            auth,
		HostKeyCallback: ssh.FixedHostKey(hostKey),
		Timeout:         5 * time.Second,
	})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *ssh.Client, cmd string) (stdout, stderr string) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var o, e bytes.Buffer
	s.Stdout, s.Stderr = &o, &e
	if err := s.Run(cmd); err != nil {
		t.Fatalf("run %q: %v (stderr %q)", cmd, err, e.String())
	}
	return o.String(), e.String()
}

func TestSSHDKillEndsEveryProcess(t *testing.T) {
	srv := testenv.SSHD(t)
	signer, err := ssh.ParsePrivateKey(srv.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, srv.Addr, srv.User, srv.HostPublicKey, ssh.PublicKeys(signer))
	if out, _ := run(t, c, "echo hello"); out != "hello\n" {
		t.Fatalf("echo: got %q", out)
	}
	if fi, err := os.Stat(srv.KnownHostsFile); err != nil || fi.Size() != 0 {
		t.Fatalf("KnownHostsFile should exist and be empty: %v %v", fi, err)
	}

	// A job that would outlive the session's shell if only sshd died.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("sleep 1000 & echo $!; wait"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 32)
	n, err := out.Read(line)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(line[:n])))
	if err != nil || !testenv.Running(pid) {
		t.Fatalf("sleep pid %q: %v", line[:n], err)
	}

	srv.Kill()
	srv.Kill() // idempotent
	if testenv.Running(pid) {
		t.Errorf("sleep %d survived Kill", pid)
	}
	if conn, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Kill", srv.Addr)
	}
	if err := c.Wait(); err == nil {
		t.Errorf("client connection survived Kill")
	}
	if !strings.Contains(srv.Log(), "Accepted publickey") {
		t.Errorf("log lacks the login:\n%s", srv.Log())
	}
}

// TestPrivateHome: logins get a HOME of their own, so the machine user's
// startup files never reach a test's shell.
func TestPrivateHome(t *testing.T) {
	t.Parallel()
	real, _ := os.UserHomeDir()
	d := testenv.SSHD(t)
	signer, err := ssh.ParsePrivateKey(d.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.PasswordSSHD(t, "carol", "pw", "password")
	for _, tc := range []struct {
		name, addr, user, home string
		hostKey                ssh.PublicKey
		auth                   ssh.AuthMethod
	}{
		{"sshd", d.Addr, d.User, d.Home, d.HostPublicKey, ssh.PublicKeys(signer)},
		{"password server", p.Addr, "carol", p.Home, p.HostPublicKey, ssh.Password("pw")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.addr, tc.user, tc.hostKey, tc.auth)
			out, _ := run(t, c, `echo "$HOME"; bash -ic 'echo "~=$(cd ~ && pwd)"' 2>/dev/null`)
			if want := tc.home + "\n~=" + tc.home + "\n"; out != want || tc.home == "" || tc.home == real {
				t.Errorf("got %q, want %q (the user's real home is %q)", out, want, real)
			}
		})
	}
}

func TestPasswordSSHD(t *testing.T) {
	t.Parallel()
	srv := testenv.PasswordSSHD(t, "alice", "s3cret")
	answer := ssh.KeyboardInteractive(func(_, _ string, qs []string, _ []bool) ([]string, error) {
		a := make([]string, len(qs))
		for i := range a {
			a[i] = "s3cret"
		}
		return a, nil
	})
	key, err := ssh.ParsePrivateKeyWithPassphrase(srv.ClientKey, []byte(srv.Passphrase))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ssh.ParsePrivateKey(srv.ClientKey); err == nil {
		t.Fatal("ClientKey is not encrypted")
	}
	for name, auth := range map[string]ssh.AuthMethod{
		"password":             ssh.Password("s3cret"),
		"keyboard-interactive": answer,
		"publickey":            ssh.PublicKeys(key),
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, srv.Addr, "alice", srv.HostPublicKey, auth)
			out, errOut := run(t, c, "echo out; echo err >&2")
			if out != "out\n" || errOut != "err\n" {
				t.Fatalf("got stdout %q stderr %q", out, errOut)
			}
		})
	}

	_, err = ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User: "alice", Auth: []ssh.AuthMethod{ssh.Password("wrong")},
		HostKeyCallback: ssh.FixedHostKey(srv.HostPublicKey), Timeout: 5 * time.Second,
	})
	if err == nil {
		t.Fatal("wrong password accepted")
	}
}

func TestPasswordSSHDPTY(t *testing.T) {
	t.Parallel()
	srv := testenv.PasswordSSHD(t, "bob", "pw", "password")
	c := dial(t, srv.Addr, "bob", srv.HostPublicKey, ssh.Password("pw"))
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{ssh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s.Stdout = &out
	if err := s.Run("stty size; test -t 0 && echo tty; exit 7"); err == nil {
		t.Fatal("want exit status 7")
	} else if ee, ok := err.(*ssh.ExitError); !ok || ee.ExitStatus() != 7 {
		t.Fatalf("want exit status 7, got %v", err)
	}
	if got := strings.ReplaceAll(out.String(), "\r", ""); got != "24 80\ntty\n" {
		t.Fatalf("got %q", got)
	}
}
