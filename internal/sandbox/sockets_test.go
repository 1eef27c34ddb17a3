package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestSocketHelperReachesTheSessionsLoopback: a server the sandboxed
// program runs on its namespace's 127.0.0.1:port is reached through the
// socket helper, and not the host's listener on the same port; a port
// nothing listens on is refused at once; once the program ends, so does
// the helper, and dialing fails.
func TestSocketHelperReachesTheSessionsLoopback(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if err := ProbeNamespace(context.Background(), self); err != nil {
		t.Fatalf("this host must allow network namespaces: %v", err)
	}
	// The host listens on the port the program will use: the helper must
	// not reach it.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "host\n")
			c.Close()
		}
	}()
	port := itoa(host.Addr().(*net.TCPAddr).Port)

	parent, child, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Close() })
	p := Policy{ReadWrite: []string{t.TempDir()}, ReadOnly: DefaultReadOnly(), Namespace: true, SocketFD: 3}
	// The program binds an explicit port (a dev server does), answers
	// each connection with "inside", and ends when its stdin closes.
	server := "import socket,sys,threading\n" +
		"s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1'," + port + ")); s.listen(8)\n" +
		"def serve():\n" +
		"    while True:\n" +
		"        c,_=s.accept(); c.sendall(b'inside\\n'); c.close()\n" +
		"threading.Thread(target=serve, daemon=True).start()\n" +
		"print('ready', flush=True)\n" +
		"sys.stdin.read()\n"
	cmd, err := Command(self, p, []string{"/usr/bin/python3", "-c", server})
	if err != nil {
		t.Fatal(err)
	}
	// A descriptor of the launcher's that is not the helper's (as the
	// proxy's socket pair is): the helper must not keep a copy.
	stray, err := os.CreateTemp(t.TempDir(), "stray")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stray.Close() })
	cmd.ExtraFiles = []*os.File{child, stray}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	sockets := NewSockets(parent)
	t.Cleanup(func() {
		_ = sockets.Close()
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the program did not start: %q %v; stderr: %s", line, err, stderr.String())
	}

	// The helper (the program's child) holds its standard streams, its
	// socket to tandem and the Go runtime's own (epoll, cgroup files),
	// nothing of the launcher's.
	kids, err := os.ReadFile("/proc/" + itoa(cmd.Process.Pid) + "/task/" + itoa(cmd.Process.Pid) + "/children")
	if err != nil || len(strings.Fields(string(kids))) != 1 {
		t.Fatalf("the program's children: %q %v", kids, err)
	}
	dir := "/proc/" + strings.TrimSpace(string(kids)) + "/fd/"
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(dir + fd.Name())
		n, _ := strconv.Atoi(fd.Name())
		if n > 3 && (target == stray.Name() || strings.HasPrefix(target, "socket:")) {
			t.Errorf("the socket helper holds descriptor %d: %s", n, target)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 3 { // a socket per dial
		c, err := sockets.Dial(ctx, host.Addr().(*net.TCPAddr).Port)
		if err != nil {
			t.Fatalf("dial %d: %v; stderr: %s", i, err, stderr.String())
		}
		got, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if got != "inside\n" {
			t.Fatalf("dial %d reached %q, want the program's server", i, got)
		}
	}
	if _, err := sockets.Dial(ctx, 1); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port nothing listens on in the namespace: %v, want connection refused", err)
	}

	// The program ends: the helper's socket closes, and dialing fails.
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program: %v; %s", err, stderr.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := sockets.Dial(ctx, host.Addr().(*net.TCPAddr).Port)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the socket helper outlived the program")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
