package sshconn_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// echo is a launch whose output proves the login worked.
var echo = shell.Launch{Command: "echo ok-$((40+2))", Cols: 80, Rows: 24}

// checkLogin asserts that c ran echo and then reports the shell's exit.
func checkLogin(t *testing.T, c shell.Conn) {
	t.Helper()
	tm := newTerm(t, c)
	tm.waitFor(t, `ok-42`)
	err := tm.readErr(t)
	if !errors.Is(err, shell.ErrShellExited) || !strings.Contains(err.Error(), "exited with status 0") {
		t.Fatalf("Read after the shell exited: %v", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), shell.ErrShellExited) {
		t.Fatalf("Err after the shell exited: %v", c.Err())
	}
}

// encrypt re-encodes an unencrypted OpenSSH key with a passphrase.
func encrypt(t *testing.T, key []byte, passphrase string) []byte {
	t.Helper()
	raw, err := ssh.ParseRawPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", []byte(passphrase))
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// agentSocket serves an in-process ssh-agent holding key on a unix socket.
func agentSocket(t *testing.T, key []byte) string {
	t.Helper()
	raw, err := ssh.ParseRawPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: raw}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			agent.ServeAgent(keyring, c)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-served })
	return path
}

func TestDialAuthSSHD(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	dir := t.TempDir()
	const passphrase = "correct horse"
	encrypted := encrypt(t, srv.ClientKey, passphrase)
	encryptedFile := filepath.Join(dir, "id_encrypted")
	if err := os.WriteFile(encryptedFile, encrypted, 0o600); err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherBlock, _ := ssh.MarshalPrivateKey(otherPriv, "")
	sock := agentSocket(t, srv.ClientKey)

	for _, tc := range []struct {
		name    string
		set     func(o *sshconn.Options)
		wantErr error
	}{
		{"key file", func(o *sshconn.Options) {}, nil},
		{"key content", func(o *sshconn.Options) { o.KeyFile, o.PrivateKey = "", srv.ClientKey }, nil},
		{"encrypted key content", func(o *sshconn.Options) { o.KeyFile, o.PrivateKey, o.Passphrase = "", encrypted, passphrase }, nil},
		{"encrypted key file", func(o *sshconn.Options) { o.KeyFile, o.Passphrase = encryptedFile, passphrase }, nil},
		{"agent", func(o *sshconn.Options) { o.KeyFile, o.UseAgent, o.AgentSocket = "", true, sock }, nil},
		{"wrong key", func(o *sshconn.Options) { o.KeyFile, o.PrivateKey = "", pem.EncodeToMemory(otherBlock) }, sshconn.ErrAuth},
		{"wrong passphrase", func(o *sshconn.Options) { o.KeyFile, o.Passphrase = encryptedFile, "hunter2" }, sshconn.ErrAuth},
		{"missing passphrase", func(o *sshconn.Options) { o.KeyFile = encryptedFile }, sshconn.ErrAuth},
		{"agent unreachable", func(o *sshconn.Options) { o.KeyFile, o.UseAgent, o.AgentSocket = "", true, filepath.Join(dir, "nope") }, sshconn.ErrAuth},
		{"no credentials", func(o *sshconn.Options) { o.KeyFile = "" }, sshconn.ErrAuth},
		{"not a key", func(o *sshconn.Options) { o.KeyFile, o.PrivateKey = "", []byte("hello") }, sshconn.ErrKey},
		{"missing key file", func(o *sshconn.Options) { o.KeyFile = filepath.Join(dir, "missing") }, sshconn.ErrKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(srv)
			tc.set(o)
			c, err := dial(t, o, echo)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("dial: %v\nsshd log:\n%s", err, srv.Log())
				}
				checkLogin(t, c)
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("dial: got %v, want %v", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), passphrase) {
				t.Fatalf("error leaks the passphrase: %v", err)
			}
		})
	}
}

func TestDialAuthPassword(t *testing.T) {
	t.Parallel()
	const user, password = "alice", "pa$$word"
	for _, tc := range []struct {
		name    string
		methods []string // offered by the server
		set     func(o *sshconn.Options, srv *testenv.PasswordServer)
		wantErr error
	}{
		{"password", []string{"password"}, func(o *sshconn.Options, _ *testenv.PasswordServer) { o.Password = password }, nil},
		{"keyboard-interactive", []string{"keyboard-interactive"}, func(o *sshconn.Options, _ *testenv.PasswordServer) { o.Password = password }, nil},
		{"encrypted key", []string{"publickey"}, func(o *sshconn.Options, srv *testenv.PasswordServer) {
			o.PrivateKey, o.Passphrase = srv.ClientKey, srv.Passphrase
		}, nil},
		{"wrong password", nil, func(o *sshconn.Options, _ *testenv.PasswordServer) { o.Password = "pa$$w0rd" }, sshconn.ErrAuth},
		{"wrong user", nil, func(o *sshconn.Options, _ *testenv.PasswordServer) { o.User, o.Password = "bob", password }, sshconn.ErrAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testenv.PasswordSSHD(t, user, password, tc.methods...)
			o := &sshconn.Options{Host: srv.Host, Port: srv.Port, User: user, KnownHostsFile: srv.KnownHostsFile}
			tc.set(o, srv)
			c, err := dial(t, o, echo)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				checkLogin(t, c)
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("dial: got %v, want %v", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "pa$$w") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

// TestKeyboardInteractiveRefusalIsAuth: OpenSSH without PAM that offers
// keyboard-interactive refuses it at once, without a prompt (SSH message
// 51 where the client waits for 60). That is a refusal of the
// credentials, ErrAuth (auth_failed), not a server that speaks no SSH.
func TestKeyboardInteractiveRefusalIsAuth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, config string }{
		{"publickey,keyboard-interactive", "KbdInteractiveAuthentication yes\n"},
		{"publickey,keyboard-interactive,password", "KbdInteractiveAuthentication yes\nPasswordAuthentication yes\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := testenv.SSHDConfig(t, tc.config)
			o := &sshconn.Options{Host: srv.Host, Port: srv.Port, User: srv.User, KnownHostsFile: srv.KnownHostsFile, Password: "wrong-password"}
			_, err := dial(t, o, echo)
			if !errors.Is(err, sshconn.ErrAuth) {
				t.Fatalf("dial with a wrong password: got %v, want %v", err, sshconn.ErrAuth)
			}
			if strings.Contains(err.Error(), "wrong-password") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

func TestHostKeyAcceptNewPins(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	o := options(srv)
	// A known_hosts that does not exist yet, in a directory that does not.
	o.KnownHostsFile = filepath.Join(t.TempDir(), "ssh", "known_hosts")
	c, err := dial(t, o, echo)
	if err != nil {
		t.Fatal(err)
	}
	checkLogin(t, c)
	pinned, err := os.ReadFile(o.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	want := "[127.0.0.1]:" + strconv.Itoa(srv.Port) + " " + string(ssh.MarshalAuthorizedKey(srv.HostPublicKey))
	if string(pinned) != want {
		t.Fatalf("known_hosts:\n%q\nwant\n%q", pinned, want)
	}

	o.HostKeyPolicy = sshconn.Strict
	c, err = dial(t, o, echo)
	if err != nil {
		t.Fatalf("strict dial of the pinned host: %v", err)
	}
	checkLogin(t, c)
	if again, _ := os.ReadFile(o.KnownHostsFile); string(again) != string(pinned) {
		t.Fatalf("known_hosts changed on a known host:\n%q", again)
	}
}

func TestHostKeyChangedIsRefused(t *testing.T) {
	t.Parallel()
	first, second := testenv.SSHD(t), testenv.SSHD(t)
	p := newProxy(t, first.Addr)
	o := options(first)
	o.Port = p.port()
	c, err := dial(t, o, echo)
	if err != nil {
		t.Fatal(err)
	}
	checkLogin(t, c)
	pinned, _ := os.ReadFile(o.KnownHostsFile)

	// Same host:port, different server: the key changed.
	p.target.Store(second.Addr)
	for _, policy := range []sshconn.HostKeyPolicy{sshconn.AcceptNew, sshconn.Strict, ""} {
		t.Run(string(policy), func(t *testing.T) {
			o := *o
			o.HostKeyPolicy = policy
			_, err := dial(t, &o, echo)
			var hkErr *sshconn.HostKeyError
			if !errors.Is(err, sshconn.ErrHostKey) || !errors.As(err, &hkErr) {
				t.Fatalf("dial: got %v, want a *HostKeyError", err)
			}
			msg := err.Error()
			for _, want := range []string{"CHANGED", "127.0.0.1:" + strconv.Itoa(p.port()), o.KnownHostsFile,
				ssh.FingerprintSHA256(second.HostPublicKey), ssh.FingerprintSHA256(first.HostPublicKey)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error lacks %q: %s", want, msg)
				}
			}
			if now, _ := os.ReadFile(o.KnownHostsFile); string(now) != string(pinned) {
				t.Errorf("known_hosts changed:\n%q", now)
			}
		})
	}
}

func TestHostKeyStrictRefusesUnknown(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	o := options(srv)
	o.HostKeyPolicy = sshconn.Strict
	_, err := dial(t, o, echo)
	var hkErr *sshconn.HostKeyError
	if !errors.As(err, &hkErr) || !errors.Is(err, sshconn.ErrHostKey) || len(hkErr.Known) != 0 {
		t.Fatalf("dial: got %v, want an unknown-host *HostKeyError", err)
	}
	for _, want := range []string{srv.KnownHostsFile, ssh.FingerprintSHA256(srv.HostPublicKey), "strict"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if b, _ := os.ReadFile(srv.KnownHostsFile); len(b) != 0 {
		t.Errorf("strict policy wrote known_hosts: %q", b)
	}
}

// silentListener accepts TCP connections and never says anything.
func silentListener(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func TestDialTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	port := silentListener(t)
	o := &sshconn.Options{Host: "127.0.0.1", Port: port, User: "x", Password: "y",
		KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"), ConnectTimeout: 300 * time.Millisecond}

	start := time.Now()
	_, err := o.Dial(context.Background(), echo)
	if !errors.Is(err, sshconn.ErrTimeout) {
		t.Fatalf("dial a silent server: got %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond+5*time.Second {
		t.Fatalf("ConnectTimeout 300ms took %v", d)
	}

	o.ConnectTimeout = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = o.Dial(ctx, echo)
	if !errors.Is(err, context.Canceled) || errors.Is(err, sshconn.ErrTimeout) {
		t.Fatalf("dial with a cancelled ctx: got %v, want context.Canceled", err)
	}
}
