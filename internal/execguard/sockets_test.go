package execguard_test

import (
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// unixPy tries the unix sockets named in its JSON argument and prints
// what each attempt returned. The racer connects to a socket inside the
// allowed roots while a second thread rewrites the address to the outside
// one, many times.
const unixPy = `
import ctypes, errno, json, os, socket, sys, threading

cfg = json.loads(sys.argv[1])
res = {}

def attempt(name, fn):
    try:
        res[name] = fn() or "ok"
    except OSError as e:
        res[name] = "error: " + errno.errorcode.get(e.errno, str(e.errno))

def stream(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        s.sendall(b"marker")
    finally:
        s.close()

def dgram(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(b"marker", path)
    finally:
        s.close()

def dgram_msg(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendmsg([b"marker"], [], 0, path)
    finally:
        s.close()

def nonblocking(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
        s.sendall(b"marker")
    finally:
        s.close()

def pair():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    got = b.recv(4)
    a.close(); b.close()
    return "ok" if got == b"ping" else "got %r" % got

def inside():
    path = os.path.join(cfg["ws"], "srv.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    c.sendall(b"hello")
    got = a.recv(5)
    for s in (a, c, srv):
        s.close()
    os.unlink(path)
    return "ok" if got == b"hello" else "got %r" % got

def inside_relative():
    os.chdir(cfg["ws"])
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("rel.sock")
    srv.listen(1)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("rel.sock")
    c.close(); srv.close()
    os.unlink("rel.sock")

def symlinked():
    link = os.path.join(cfg["ws"], "link.sock")
    os.symlink(cfg["outside"], link)
    try:
        stream(link)
    finally:
        os.unlink(link)

def race():
    libc = ctypes.CDLL(None, use_errno=True)
    class SA(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
    good = os.path.join(cfg["ws"], "race.sock").encode()
    bad = cfg["outside"].encode()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(good)
    srv.listen(4096)
    sa = SA(socket.AF_UNIX, good)
    off = SA.path.offset
    stop = []
    def flip():
        base = ctypes.addressof(sa) + off
        while not stop:
            ctypes.memmove(base, bad + b"\0", len(bad) + 1)
            ctypes.memmove(base, good + b"\0", len(good) + 1)
    t = threading.Thread(target=flip)
    t.start()
    ok = 0
    try:
        for i in range(cfg["tries"]):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if libc.connect(s.fileno(), ctypes.byref(sa), ctypes.sizeof(sa)) == 0:
                ok += 1
                try:
                    s.send(b"marker")
                except OSError:
                    pass
            s.close()
            try:
                srv.setblocking(False)
                while True:
                    srv.accept()[0].close()
            except OSError:
                pass
    finally:
        stop.append(1)
        t.join()
        srv.close()
        os.unlink(good)
    return "ok %d" % ok

attempt("outside stream", lambda: stream(cfg["outside"]))
attempt("outside missing", lambda: stream(cfg["outside"] + ".missing"))
attempt("inside missing", lambda: stream(os.path.join(cfg["ws"], "missing.sock")))
attempt("outside stream nonblocking", lambda: nonblocking(cfg["outside"]))
attempt("outside datagram sendto", lambda: dgram(cfg["outsideDgram"]))
attempt("outside datagram sendmsg", lambda: dgram_msg(cfg["outsideDgram"]))
attempt("outside through a workspace symlink", symlinked)
attempt("listed stream", lambda: stream(cfg["listed"]))
attempt("socketpair", pair)
attempt("inside server and client", inside)
attempt("inside relative", inside_relative)
attempt("race", race)
print(json.dumps(res))
`

// catcher counts what reaches a stream or datagram socket of the test.
type catcher struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *catcher) hit(name string) {
	c.mu.Lock()
	c.got[name]++
	c.mu.Unlock()
}

func (c *catcher) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[name]
}

// stream listens on path and counts every connection accepted there.
func (c *catcher) stream(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.hit(path)
			go func() {
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, conn)
				_ = conn.Close()
			}()
		}
	}()
}

// dgram listens on path and counts every datagram.
func (c *catcher) dgram(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		var b [256]byte
		for {
			if _, _, err := l.ReadFrom(b[:]); err != nil {
				return
			}
			c.hit(path)
		}
	}()
}

// TestUnixSocketsOutsideRefused: under the filter, a pathname unix socket
// outside the allowed roots receives nothing, by connect (blocking or
// not), sendto, sendmsg, or a workspace symlink to it; a listed socket,
// a server and client in the workspace and a socketpair work; and a
// second thread that rewrites the address between the workspace socket
// and the outside one during connect never reaches the outside.
func TestUnixSocketsOutsideRefused(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	ws, out, listedDir := t.TempDir(), t.TempDir(), t.TempDir()
	c := &catcher{got: map[string]int{}}
	outside := filepath.Join(out, "outside.sock")
	outsideDgram := filepath.Join(out, "outside-dgram.sock")
	listed := filepath.Join(listedDir, "listed.sock")
	c.stream(t, outside)
	c.dgram(t, outsideDgram)
	c.stream(t, listed)
	if err := os.WriteFile(filepath.Join(ws, "unix.py"), []byte(unixPy), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"ws": ws, "outside": outside, "outsideDgram": outsideDgram, "listed": listed, "tries": 2000})
	g := start(t, ws, "exec python3 unix.py '"+string(cfg)+"'", nil)
	g.serveUnix(t, (&log{}).judge, ws, listed)
	text, code := g.wait(t)
	var res map[string]string
	if err := json.Unmarshal([]byte(text[strings.LastIndexByte(strings.TrimSpace(text), '\n')+1:]), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, output %q (%v)", code, text, err)
	}
	want := map[string]string{
		"outside stream":                      "error: EACCES",
		"outside stream nonblocking":          "error: EACCES",
		"outside datagram sendto":             "error: EACCES",
		"outside datagram sendmsg":            "error: EACCES",
		"outside through a workspace symlink": "error: EACCES",
		"listed stream":                       "ok",
		"socketpair":                          "ok",
		"inside server and client":            "ok",
		"inside relative":                     "ok",
	}
	for name, w := range want {
		if res[name] != w {
			t.Errorf("%s: %q, want %q", name, res[name], w)
		}
	}
	if !strings.HasPrefix(res["race"], "ok ") {
		t.Errorf("race: %q", res["race"])
	}
	t.Logf("%v", res)
	// The listed socket got its connection: the counts are live.
	for deadline := time.Now().Add(5 * time.Second); c.count(listed) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listed socket never saw its connection")
		}
	}
	// A sentinel of the test's own: whatever the session sent has been
	// counted once the sentinel has.
	if conn, err := net.Dial("unix", outside); err == nil {
		_ = conn.Close()
	}
	if conn, err := net.Dial("unixgram", outsideDgram); err == nil {
		_, _ = conn.Write([]byte("sentinel"))
		_ = conn.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); c.count(outside) == 0 || c.count(outsideDgram) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sentinels never arrived")
		}
	}
	if n := c.count(outside) - 1; n != 0 {
		t.Errorf("the outside stream socket accepted %d connections", n)
	}
	if n := c.count(outsideDgram) - 1; n != 0 {
		t.Errorf("the outside datagram socket received %d datagrams", n)
	}
}

// serveUnix is serve with the allowed unix roots.
func (g *guarded) serveUnix(t *testing.T, judge execguard.Judge, roots ...string) (stop func()) {
	t.Helper()
	g.allow = execguard.SocketRules{UnixRoots: roots}
	return g.serve(t, judge)
}

// TestListenUnderNetFilter: under the network fallback filter, which
// refuses listen itself, the execguard filter sends listen to tandem: a
// unix socket in the workspace serves, a TCP socket still cannot listen.
func TestListenUnderNetFilter(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	const py = `
import errno, json, socket
res = {}
for name, fam, addr in [("unix", socket.AF_UNIX, "l.sock"), ("tcp", socket.AF_INET, None)]:
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        if addr:
            s.bind(addr)
        s.listen(1)
        res[name] = "ok"
    except OSError as e:
        res[name] = "error: " + errno.errorcode.get(e.errno, str(e.errno))
    s.close()
print(json.dumps(res))
`
	for _, judged := range []bool{false, true} {
		t.Run(map[bool]string{false: "execs unjudged", true: "execs judged"}[judged], func(t *testing.T) {
			ws := t.TempDir()
			g := startWith(t, ws, "exec python3 -c '"+py+"'", nil, func(p *sandbox.Policy) {
				p.NetFilter, p.ExecsUnjudged = true, !judged
			})
			g.serveUnix(t, (&log{}).judge, ws)
			text, code := g.wait(t)
			var res map[string]string
			if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &res); err != nil || code != 0 {
				t.Fatalf("exit %d, output %q (%v)", code, text, err)
			}
			if res["unix"] != "ok" || res["tcp"] != "error: EPERM" {
				t.Errorf("unix listen %q (want ok), tcp listen %q (want EPERM)", res["unix"], res["tcp"])
			}
		})
	}
}

// TestBlockedConnectEndsServing: a connect tandem makes for the process
// that blocks (the listener's backlog is full) holds up neither the end of
// serving nor the process's death.
func TestBlockedConnectEndsServing(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	ws := t.TempDir()
	sock := filepath.Join(ws, "full.sock")
	// A listener that never accepts, with the smallest backlog.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	const py = `
import os, socket, sys
held = []
for i in range(8):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    held.append(s)
    open("connected-%d" % i, "w").close()
`
	g := startWith(t, ws, "exec python3 -c '"+py+"' "+sock, nil, func(p *sandbox.Policy) { p.ExecsUnjudged = true })
	stop := g.serveUnix(t, nil, ws)
	// The first connects fill the backlog; then one blocks in tandem.
	pid := strconv.Itoa(g.cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(ws, "connected-0"))
		b, _ := os.ReadFile("/proc/" + pid + "/syscall")
		if err == nil && strings.HasPrefix(string(b), map[string]string{"amd64": "42 ", "arm64": "203 "}[runtime.GOARCH]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("python never blocked in connect (%q, %v)", b, err)
		}
	}
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("serving did not end while a connect made for the process blocked")
	}
	_ = g.cmd.Process.Kill()
	if _, code := g.wait(t); code == 0 {
		t.Errorf("python exited 0")
	}
}
