package testenv

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	gssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"
)

// SSHDPath is where Debian's openssh-server package installs sshd.
const SSHDPath = "/usr/sbin/sshd"

// SSHDServer is a real OpenSSH sshd listening on loopback for one test, so
// the ssh backend is tested against the server it meets in production.
// It accepts only public-key logins with ClientKey, as the current user.
type SSHDServer struct {
	Addr string // "127.0.0.1:PORT"
	Host string // always "127.0.0.1"
	Port int
	// User is the current user's name: sshd can only log in as the user
	// it runs as (or anyone, when run as root).
	User string
	// ClientKey is the unencrypted ed25519 private key (OpenSSH PEM) that
	// the server authorizes; ClientKeyFile holds the same bytes.
	ClientKey     []byte
	ClientKeyFile string
	// KnownHostsFile is an empty file the test may use and fill.
	KnownHostsFile string
	HostPublicKey  ssh.PublicKey
	// Home is the login's HOME, an empty directory of its own. The real
	// user's startup files (pyenv and the like) are slow, and a shell
	// killed mid-start can leave their locks behind for the next test.
	Home string

	cmd      *exec.Cmd
	exited   chan struct{}
	logFile  string
	killOnce sync.Once
	extra    string // sshd_config lines before the fixture's own
}

// SSHD starts sshd for t and stops it, with every process it spawned, in
// t.Cleanup. Without sshd it skips t, or fails it when CI=true (see
// Missing), so CI can never pass by skipping.
func SSHD(t testing.TB) *SSHDServer {
	t.Helper()
	return SSHDConfig(t, "")
}

// SSHDConfig is SSHD with more sshd_config lines, which take precedence
// over the fixture's own (sshd keeps a keyword's first value): for
// example "KbdInteractiveAuthentication yes" to offer keyboard-interactive
// as an sshd without PAM does, refusing every answer.
func SSHDConfig(t testing.TB, extra string) *SSHDServer {
	t.Helper()
	if extra != "" && !strings.HasSuffix(extra, "\n") {
		extra += "\n"
	}
	if _, err := os.Stat(SSHDPath); err != nil {
		Missing(t, "testenv: %s not found: install openssh-server", SSHDPath)
	}
	if os.Geteuid() == 0 {
		// sshd's privilege separation chroots into /run/sshd when run as root.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatalf("testenv: current user: %v", err)
	}
	dir := t.TempDir()
	s := &SSHDServer{
		Host:           "127.0.0.1",
		User:           u.Username,
		ClientKeyFile:  filepath.Join(dir, "id_ed25519"),
		KnownHostsFile: filepath.Join(dir, "known_hosts"),
		logFile:        filepath.Join(dir, "sshd.log"),
		Home:           filepath.Join(dir, "home"),
		extra:          extra,
	}
	if err := os.Mkdir(s.Home, 0o755); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	hostKey, hostSigner := newKey(t, "")
	s.HostPublicKey = hostSigner.PublicKey()
	var clientSigner ssh.Signer
	s.ClientKey, clientSigner = newKey(t, "")
	writeFile(t, filepath.Join(dir, "ssh_host_ed25519_key"), hostKey)
	writeFile(t, s.ClientKeyFile, s.ClientKey)
	writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientSigner.PublicKey()))
	writeFile(t, s.KnownHostsFile, nil)

	// The free port may be taken again before sshd binds it; retry then.
	for attempt := 1; ; attempt++ {
		err := s.start(t, dir)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(s.Log(), "Address already in use") {
			t.Fatalf("testenv: start sshd: %v\nlog:\n%s", err, s.Log())
		}
	}
	t.Cleanup(s.Kill)
	return s
}

func (s *SSHDServer) start(t testing.TB, dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.Addr = net.JoinHostPort(s.Host, strconv.Itoa(s.Port))

	cfg := filepath.Join(dir, "sshd_config")
	base := s.extra + fmt.Sprintf(`ListenAddress %s
Port %d
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
Subsystem sftp internal-sftp
LogLevel VERBOSE
`, s.Host, s.Port, filepath.Join(dir, "ssh_host_ed25519_key"),
		filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"))
	// OpenSSH 9.8 penalises clients that fail logins, which tests do on
	// purpose; older versions reject the option, so probe with sshd -t.
	// SetEnv overrides the HOME sshd derives from the password database;
	// other users (the benchmark's) keep their own.
	home := fmt.Sprintf("Match User %s\n\tSetEnv HOME=%s\n", s.User, s.Home)
	writeFile(t, cfg, []byte(base+"PerSourcePenalties no\n"+home))
	if exec.Command(SSHDPath, "-t", "-f", cfg).Run() != nil {
		writeFile(t, cfg, []byte(base+home))
	}

	logf, err := os.Create(s.logFile)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.cmd = exec.Command(SSHDPath, "-D", "-e", "-f", cfg)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.exited) }()
	if err := waitBanner(s.Addr, s.exited, 10*time.Second); err != nil {
		s.killTree()
		return err
	}
	return nil
}

// waitBanner polls addr until it answers with an SSH banner.
func waitBanner(addr string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("sshd exited")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("no SSH banner on %s after %v", addr, timeout)
}

// Kill SIGKILLs sshd and every process below it (per-connection sshd
// children, login shells, their jobs), as when a host dies mid-command.
// Clients see their TCP connections close. It is safe to call twice.
func (s *SSHDServer) Kill() {
	s.killOnce.Do(s.killTree)
}

func (s *SSHDServer) killTree() {
	killProcessTree(s.cmd.Process.Pid)
	<-s.exited
}

// Log returns sshd's output so far; tests print it when a login fails.
func (s *SSHDServer) Log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// killProcessTree SIGKILLs pid and all its descendants. It stops them
// first, so none can fork a child that escapes while the tree is walked.
func killProcessTree(pid int) {
	stopped := map[int]bool{}
	for grew := true; grew; {
		grew = false
		for _, p := range append([]int{pid}, descendants(pid)...) {
			if !stopped[p] {
				syscall.Kill(p, syscall.SIGSTOP)
				stopped[p], grew = true, true
			}
		}
	}
	for p := range stopped {
		syscall.Kill(p, syscall.SIGKILL)
	}
	// kill(2) only queues the signal: wait until every process is dead.
	deadline := time.Now().Add(10 * time.Second)
	for p := range stopped {
		for Running(p) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Running reports whether pid exists and is not a zombie. Tests use it to
// see a process die without calling Wait, which its owner may be doing.
func Running(pid int) bool {
	f := procStat(pid)
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, ...), or nil if pid is gone. The name is in parentheses
// and may contain anything, so fields start after the last ')'.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
}

// descendants lists the processes below pid, read from /proc/*/stat.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(p)
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []int
	for queue := children[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

// PasswordServer is an in-process SSH server for the logins real sshd has
// switched off here: password, keyboard-interactive, and an encrypted key.
// It runs exec commands through /bin/sh -c, in a real PTY when asked.
type PasswordServer struct {
	Addr     string
	Host     string
	Port     int
	User     string
	Password string
	// ClientKey is an ed25519 private key encrypted with Passphrase; the
	// server accepts it for User.
	ClientKey      []byte
	Passphrase     string
	KnownHostsFile string // an empty file the test may use
	HostPublicKey  ssh.PublicKey
	Home           string // the sessions' HOME, as SSHDServer.Home
}

// PasswordSSHD starts a PasswordServer for t on 127.0.0.1:0. methods limits
// the auth methods offered ("password", "keyboard-interactive",
// "publickey"); none means all three.
func PasswordSSHD(t testing.TB, user, password string, methods ...string) *PasswordServer {
	t.Helper()
	var secret [8]byte
	rand.Read(secret[:])
	p := &PasswordServer{
		Host: "127.0.0.1", User: user, Password: password,
		Passphrase:     hex.EncodeToString(secret[:]),
		KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts"),
		Home:           t.TempDir(),
	}
	writeFile(t, p.KnownHostsFile, nil)
	_, hostSigner := newKey(t, "")
	p.HostPublicKey = hostSigner.PublicKey()
	var clientSigner ssh.Signer
	p.ClientKey, clientSigner = newKey(t, p.Passphrase)

	allow := func(m string) bool {
		if len(methods) == 0 {
			return true
		}
		for _, x := range methods {
			if x == m {
				return true
			}
		}
		return false
	}
	var (
		mu       sync.Mutex
		closed   bool
		handlers sync.WaitGroup
	)
	srv := &gssh.Server{Handler: func(s gssh.Session) {
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		handlers.Add(1)
		mu.Unlock()
		defer handlers.Done()
		runSession(s, p.Home)
	}}
	srv.AddHostKey(hostSigner)
	ok := func(ctx gssh.Context, got string) bool {
		return ctx.User() == user && subtle.ConstantTimeCompare([]byte(got), []byte(password)) == 1
	}
	if allow("password") {
		srv.PasswordHandler = ok
	}
	if allow("keyboard-interactive") {
		srv.KeyboardInteractiveHandler = func(ctx gssh.Context, ask ssh.KeyboardInteractiveChallenge) bool {
			answers, err := ask(user, "", []string{"Password: "}, []bool{false})
			return err == nil && len(answers) == 1 && ok(ctx, answers[0])
		}
	}
	if allow("publickey") {
		srv.PublicKeyHandler = func(ctx gssh.Context, key gssh.PublicKey) bool {
			return ctx.User() == user && gssh.KeysEqual(key, clientSigner.PublicKey())
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	p.Addr = ln.Addr().String()
	p.Port = ln.Addr().(*net.TCPAddr).Port
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
		mu.Lock()
		closed = true
		mu.Unlock()
		handlers.Wait()
	})
	return p
}

// runSession runs one exec request with HOME set to home: in a PTY with
// window changes when the client asked for one, else on plain pipes with
// stderr kept apart.
func runSession(s gssh.Session, home string) {
	cmd := exec.Command("/bin/sh", "-c", s.RawCommand())
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.Dir = home
	ptyReq, winCh, isPty := s.Pty()
	var tty *os.File
	var in io.WriteCloser
	var err error
	if isPty {
		cmd.Env = append(cmd.Env, "TERM="+ptyReq.Term)
		tty, err = pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(ptyReq.Window.Height), Cols: uint16(ptyReq.Window.Width)})
		in = tty
	} else {
		cmd.Stdout, cmd.Stderr = s, s.Stderr()
		// A session of its own, as sshd gives: in the terminal's session an
		// interactive shell (`bash -ic`) would take the terminal that runs
		// the tests and be stopped (SIGTTOU) until the test timed out.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if in, err = cmd.StdinPipe(); err == nil {
			err = cmd.Start()
		}
	}
	if err != nil {
		fmt.Fprintln(s.Stderr(), err)
		s.Exit(127)
		return
	}
	// Kill the whole process group (pty.Start makes the shell a session
	// leader) when the client goes away.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-s.Context().Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-stop:
		}
	}()
	go func() {
		io.Copy(in, s)
		if !isPty {
			in.Close()
		}
	}()
	if !isPty {
		s.Exit(exitCode(cmd.Wait()))
		return
	}
	var ttyMu sync.Mutex // os.File.Fd races with Close
	go func() {
		for w := range winCh {
			ttyMu.Lock()
			if tty != nil {
				pty.Setsize(tty, &pty.Winsize{Rows: uint16(w.Height), Cols: uint16(w.Width)})
			}
			ttyMu.Unlock()
		}
	}()
	copied := make(chan struct{})
	go func() { io.Copy(s, tty); close(copied) }()
	code := exitCode(cmd.Wait())
	select { // the master reads EIO once no process holds the tty
	case <-copied:
	case <-s.Context().Done():
	}
	ttyMu.Lock()
	tty.Close()
	tty = nil
	ttyMu.Unlock()
	s.Exit(code)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return 255
	}
	return 0
}

// newKey makes an ed25519 key: its OpenSSH PEM (encrypted when passphrase
// is set) and a signer for it.
func newKey(t testing.TB, passphrase string) ([]byte, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "tandem-test")
	if passphrase != "" {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "tandem-test", []byte(passphrase))
	}
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return pem.EncodeToMemory(block), signer
}

func writeFile(t testing.TB, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}
