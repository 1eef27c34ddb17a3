package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// attackPy tries every way out of a session that we know of, against the
// test's listeners, and prints what each attempt returned. "listen" mode
// instead listens every way it can, writes the ports to a file and serves
// the marker to whoever connects.
const attackPy = `
import ctypes, errno, json, select, socket, struct, sys, os, threading

cfg = json.loads(sys.argv[2])
marker = cfg["marker"].encode()
res = {}

def attempt(name, fn):
    try:
        r = fn()
        res[name] = r if isinstance(r, str) else "ok"
    except OSError as e:
        res[name] = "error: " + (errno.errorcode.get(e.errno, str(e.errno)) if e.errno else str(e))

def fam(h):
    return socket.AF_INET6 if ":" in h else socket.AF_INET

def stream(h, proto=0):
    s = socket.socket(fam(h), socket.SOCK_STREAM, proto)
    s.settimeout(3)
    return s

def tcp(h, p, proto=0):
    s = stream(h, proto)
    try:
        s.connect((h, p))
        s.sendall(marker)
    finally:
        s.close()

def fastopen(h, p):
    s = stream(h)
    try:
        s.sendto(marker, socket.MSG_FASTOPEN, (h, p))
    finally:
        s.close()

def fastopen_connect(h, p):
    s = stream(h)
    try:
        s.setsockopt(socket.IPPROTO_TCP, 30, 1)  # TCP_FASTOPEN_CONNECT
        s.connect((h, p))
        s.sendall(marker)
    finally:
        s.close()

def udp(h, p, payload=None):
    s = socket.socket(fam(h), socket.SOCK_DGRAM)
    try:
        s.sendto(payload or marker, (h, p))
    finally:
        s.close()

def dns_query():
    name = b"".join(bytes([len(l)]) + l for l in [marker, b"test"]) + b"\0"
    return struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + name + struct.pack(">HH", 1, 1)

def icmp_echo():
    body = struct.pack(">BBHHH", 8, 0, 0, 1, 1) + marker
    s = sum(struct.unpack("!%dH" % (len(body) // 2), body[: len(body) // 2 * 2]))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return body[:2] + struct.pack(">H", ~s & 0xFFFF) + body[4:]

def raw(h, typ, proto):
    s = socket.socket(socket.AF_INET, typ, proto)
    try:
        s.sendto(icmp_echo(), (h, 0))
    finally:
        s.close()

def packet():
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
    s.close()

def abstract(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect("\0" + name)
        s.sendall(marker)
    finally:
        s.close()

def unix_stream(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(path)
        s.sendall(marker)
    finally:
        s.close()

def unix_sendto(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendto(marker, path)
    finally:
        s.close()

def unix_sendmsg(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.sendmsg([marker], [], 0, path)
    finally:
        s.close()

def unix_inside(typ):
    path = os.path.join(cfg["ws"], "pair-%d.sock" % typ)
    srv = socket.socket(socket.AF_UNIX, typ)
    srv.bind(path)
    try:
        c = socket.socket(socket.AF_UNIX, typ)
        if typ == socket.SOCK_STREAM:
            srv.listen(1)
            c.connect(path)
            a, _ = srv.accept()
            c.sendall(b"hello")
            got = a.recv(5)
            a.close()
        else:
            c.sendto(b"hello", path)
            got = srv.recv(5)
        c.close()
        return "ok" if got == b"hello" else "got %r" % got
    finally:
        srv.close()
        os.unlink(path)

def unix_pair():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    got = b.recv(4)
    a.close(); b.close()
    return "ok" if got == b"ping" else "got %r" % got

def unix_race(good, bad, tries):
    # A second thread rewrites sun_path between the allowed socket and the
    # outside one while the first connects, tries times.
    libc = ctypes.CDLL(None, use_errno=True)
    class SA(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
    good, bad = good.encode(), bad.encode()
    sa = SA(socket.AF_UNIX, good)
    base = ctypes.addressof(sa) + SA.path.offset
    stop = []
    def flip():
        while not stop:
            ctypes.memmove(base, bad + b"\0", len(bad) + 1)
            ctypes.memmove(base, good + b"\0", len(good) + 1)
    t = threading.Thread(target=flip)
    t.start()
    ok = 0
    try:
        for i in range(tries):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if libc.connect(s.fileno(), ctypes.byref(sa), ctypes.sizeof(sa)) == 0:
                ok += 1
                try:
                    s.send(marker)
                except OSError:
                    pass
            s.close()
    finally:
        stop.append(1)
        t.join()
    return "ok %d" % ok

def io_uring():
    params = ctypes.create_string_buffer(120)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.syscall(425, 4, params)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    os.close(fd)

def setns_then_udp(pid, h, p):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/proc/%d/ns/net" % pid, os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)
    udp(h, p)

def tandem_pid():
    bash = os.getppid()
    with open("/proc/%d/stat" % bash) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])

def listen_mode(path):
    socks, out = [], {}
    def add(name, f, addr, proto, bind):
        try:
            s = socket.socket(f, socket.SOCK_STREAM, proto)
            if bind:
                s.bind((addr, 0))
            s.listen(8)
            socks.append(s)
            out[name] = [addr, s.getsockname()[1]]
        except OSError as e:
            out[name] = "error: " + errno.errorcode.get(e.errno, str(e.errno))
    add("tcp bind", socket.AF_INET, "127.0.0.1", 0, True)
    add("tcp listen without bind", socket.AF_INET, "127.0.0.1", 0, False)
    add("tcp6 listen without bind", socket.AF_INET6, "::1", 0, False)
    add("mptcp bind", socket.AF_INET, "127.0.0.1", 262, True)
    add("mptcp listen without bind", socket.AF_INET, "127.0.0.1", 262, False)
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.rename(path + ".tmp", path)
    while socks:
        for s in select.select(socks, [], [])[0]:
            c, _ = s.accept()
            c.sendall(marker)
            c.close()

if sys.argv[1] == "unix":
    attempt("listed", lambda: unix_stream(cfg["listed"]))
    attempt("socketpair", unix_pair)
    attempt("inside datagram", lambda: unix_inside(socket.SOCK_DGRAM))
    if cfg["listen"]:
        attempt("inside stream", lambda: unix_inside(socket.SOCK_STREAM))
    attempt("race", lambda: unix_race(cfg["raceGood"], cfg["raceBad"], 2000))
    print(json.dumps(res))
    sys.exit(0)

if sys.argv[1] == "listen":
    listen_mode(sys.argv[3])
    sys.exit(0)

for h, p in cfg["tcp"]:
    attempt("tcp %s %d" % (h, p), lambda: tcp(h, p))
    attempt("mptcp %s %d" % (h, p), lambda: tcp(h, p, 262))
    attempt("sctp %s %d" % (h, p), lambda: tcp(h, p, 132))
    attempt("sendto MSG_FASTOPEN %s %d" % (h, p), lambda: fastopen(h, p))
    attempt("TCP_FASTOPEN_CONNECT %s %d" % (h, p), lambda: fastopen_connect(h, p))
for h, p in cfg["udp"]:
    attempt("udp %s %d" % (h, p), lambda: udp(h, p))
h, p = cfg["dns"]
attempt("dns %s %d" % (h, p), lambda: udp(h, p, dns_query()))
for h in ["127.0.0.1", "127.0.0.2"]:
    attempt("raw icmp %s" % h, lambda: raw(h, socket.SOCK_RAW, socket.IPPROTO_ICMP))
    attempt("ping socket %s" % h, lambda: raw(h, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))
attempt("packet socket", packet)
attempt("abstract unix", lambda: abstract(cfg["abstract"]))
for path in cfg["unixStreams"]:
    attempt("unix stream %s" % path, lambda: unix_stream(path))
for path in cfg["unixDgrams"]:
    attempt("unix sendto %s" % path, lambda: unix_sendto(path))
    attempt("unix sendmsg %s" % path, lambda: unix_sendmsg(path))
attempt("io_uring_setup", io_uring)
h, p = cfg["udp"][0]
attempt("setns into pid 1's network namespace", lambda: setns_then_udp(1, h, p))
attempt("setns into tandem's network namespace", lambda: setns_then_udp(tandem_pid(), h, p))
print(json.dumps(res))
`

// arrivals records what reaches the test's listeners.
type arrivals struct {
	mu   sync.Mutex
	seen map[string][]string // listener → what arrived
}

func (a *arrivals) note(where, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen[where] = append(a.seen[where], what)
}

// has reports whether what arrived at where.
func (a *arrivals) has(where, what string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.seen[where] {
		if strings.Contains(w, what) {
			return true
		}
	}
	return false
}

// netTrap is the test's side of the attacks: stream, datagram, abstract
// UNIX and ICMP listeners on loopback addresses, each recording what
// arrives.
type netTrap struct {
	arr      arrivals
	tcp, udp [][2]any // [host, port]
	dns      [2]any
	abstract string
	streams  map[string]string // listener name → network for the sentinel
	// Pathname unix sockets outside any session's workspace: in a temp
	// dir and in a directory under /run, which sessions may read.
	unixStreams, unixDgrams []string
}

// trap starts the listeners: TCP and UDP on 127.0.0.1, 127.0.0.2 and ::1,
// a UDP "resolver", an abstract UNIX socket, and (as root) a raw ICMP
// socket that sees every echo request on this host.
func trap(t *testing.T) *netTrap {
	t.Helper()
	n := &netTrap{arr: arrivals{seen: map[string][]string{}}, streams: map[string]string{}}
	serveStream := func(network, addr string) net.Listener {
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		name := ln.Addr().String()
		n.streams[name] = network
		go acceptInto(ln, &n.arr, name)
		return ln
	}
	servePacket := func(addr string) net.PacketConn {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		name := pc.LocalAddr().String()
		go func() {
			var b [2048]byte
			for {
				k, _, err := pc.ReadFrom(b[:])
				if err != nil {
					return
				}
				n.arr.note(name, "datagram: "+string(b[:k]))
			}
		}()
		return pc
	}
	for _, h := range []string{"127.0.0.1", "127.0.0.2", "::1"} {
		ln := serveStream("tcp", net.JoinHostPort(h, "0"))
		n.tcp = append(n.tcp, [2]any{h, ln.Addr().(*net.TCPAddr).Port})
		pc := servePacket(net.JoinHostPort(h, "0"))
		n.udp = append(n.udp, [2]any{h, pc.LocalAddr().(*net.UDPAddr).Port})
	}
	dns := servePacket("127.0.0.1:0")
	n.dns = [2]any{"127.0.0.1", dns.LocalAddr().(*net.UDPAddr).Port}
	var rb [8]byte
	_, _ = rand.Read(rb[:])
	n.abstract = "tandem-test-" + hex.EncodeToString(rb[:])
	serveStream("unix", "@"+n.abstract)
	runDir, err := os.MkdirTemp("/run", "tandem-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(runDir) })
	for _, dir := range []string{t.TempDir(), runDir} {
		n.unixStreams = append(n.unixStreams, serveStream("unix", filepath.Join(dir, "stream.sock")).Addr().String())
		path := filepath.Join(dir, "dgram.sock")
		pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pc.Close() })
		n.unixDgrams = append(n.unixDgrams, path)
		go func() {
			var b [2048]byte
			for {
				k, _, err := pc.ReadFrom(b[:])
				if err != nil {
					return
				}
				n.arr.note(path, "datagram: "+string(b[:k]))
			}
		}()
	}

	icmp, err := net.ListenPacket("ip4:icmp", "0.0.0.0")
	if err != nil {
		t.Fatalf("a raw ICMP socket to watch for echo requests (the test runs as root): %v", err)
	}
	t.Cleanup(func() { _ = icmp.Close() })
	go func() {
		var b [2048]byte
		for {
			k, from, err := icmp.ReadFrom(b[:])
			if err != nil {
				return
			}
			if k > 0 && b[0] == 8 { // an echo request
				n.arr.note("icmp", fmt.Sprintf("echo request from %v: %q", from, b[:k]))
			}
		}
	}()
	return n
}

// settle waits until a sentinel sent by the test itself has reached every
// stream and datagram listener: whatever a session sent before has been
// recorded by then.
func (n *netTrap) settle(t *testing.T) {
	t.Helper()
	sentinel := "sentinel-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var names []string
	for name, network := range n.streams {
		addr := name
		if network == "unix" && !strings.HasPrefix(name, "/") {
			addr = "@" + n.abstract
		}
		c, err := net.Dial(network, addr)
		if err != nil {
			t.Fatalf("sentinel to %s: %v", name, err)
		}
		_, _ = c.Write([]byte(sentinel))
		_ = c.Close()
		names = append(names, name)
	}
	for _, path := range n.unixDgrams {
		c, err := net.Dial("unixgram", path)
		if err != nil {
			t.Fatalf("sentinel to %s: %v", path, err)
		}
		_, _ = c.Write([]byte(sentinel))
		_ = c.Close()
		names = append(names, path)
	}
	for _, u := range append(n.udp, n.dns) {
		addr := net.JoinHostPort(u[0].(string), strconv.Itoa(u[1].(int)))
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(sentinel))
		_ = c.Close()
		names = append(names, c.RemoteAddr().String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range names {
		for !n.arr.has(name, sentinel) {
			if time.Now().After(deadline) {
				t.Fatalf("the sentinel never reached %s", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// caught lists what reached a listener carrying marker.
func (n *netTrap) caught(marker string) []string {
	n.arr.mu.Lock()
	defer n.arr.mu.Unlock()
	var out []string
	for where, ws := range n.arr.seen {
		for _, w := range ws {
			if strings.Contains(w, marker) {
				out = append(out, where+": "+w)
			}
		}
	}
	return out
}

// TestNetworkContainment: from a session with network: false and from
// one with an allowlist, a hostile program tries every way out we know
// of (plain TCP, MPTCP, SCTP, TCP Fast Open both ways, UDP, a DNS query,
// raw, ping and packet sockets, an abstract UNIX socket, pathname UNIX
// sockets outside the workspace (stream and datagram, in a temp dir and
// under /run), io_uring, setns into the host's namespace through /proc)
// toward listeners of the test on 127.0.0.1, 127.0.0.2, ::1 and those
// paths. Nothing arrives, not even from a racer that rewrites a workspace
// socket's path into an outside one; a socket the target lists in
// unixSockets, a socketpair and a server in the workspace work; what it
// makes listen is not reachable from the host; the allowlisted session
// still downloads through its proxy. It runs with a network namespace per
// session and with namespaces off (the fallback filter), where every
// attempt must fail outright.
func TestNetworkContainment(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	for _, mode := range []string{"namespace", "fallback"} {
		t.Run(mode, func(t *testing.T) {
			namespace := mode == "namespace"
			n := trap(t)
			dl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "through the proxy") }))
			t.Cleanup(dl.Close)
			dlPort := portOf(t, dl.Listener.Addr())
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "attack.py"), []byte(attackPy), 0o644); err != nil {
				t.Fatal(err)
			}
			// A socket the targets list (unixSockets) is reachable.
			listed := filepath.Join(t.TempDir(), "listed.sock")
			var listedArr arrivals
			listedArr.seen = map[string][]string{}
			lln, err := net.Listen("unix", listed)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lln.Close() })
			go acceptInto(lln, &listedArr, listed)
			cfg := egressConfig(ws, map[string]string{
				"off":     "false",
				"allowed": fmt.Sprintf(`{allow: ["127.0.0.1:%d"]}`, dlPort),
			}, "allowAdHoc: false\n")
			cfg = strings.ReplaceAll(cfg, "    network: ", "    unixSockets: ["+listed+"]\n    network: ")
			var env []string
			if !namespace {
				env = []string{"TANDEM_NETNS=off"}
			}
			srv := startServer(t, serverOpts{dir: ws, config: cfg, env: env})
			defer func() {
				// The fallback is said once in tandem's log, at start.
				const warning = "sandboxed local sessions get no network namespace of their own"
				if n, want := strings.Count(srv.log(), warning), map[bool]int{true: 0, false: 1}[namespace]; n != want {
					t.Errorf("the log says %d times that sessions get no namespace, want %d", n, want)
				}
			}()
			for _, target := range []string{"off", "allowed"} {
				t.Run(target, func(t *testing.T) {
					r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": target, "target": target}))
					s := sess{srv, target, str(r["sessionToken"])}
					sb, _ := r["sandbox"].(map[string]any)
					if want := map[bool]string{true: "namespace", false: "seccomp"}[namespace]; sb["network"] != want {
						t.Errorf("the reply's sandbox.network is %v, want %s: %v", sb["network"], want, sb)
					}
					if !namespace && !strings.Contains(str(sb["networkNote"]), "TANDEM_NETNS=off") {
						t.Errorf("the fallback is not explained in the reply: %v", sb)
					}
					containedFrom(t, s, n, ws, namespace)
					unixFrom(t, s, n, ws, listed, &listedArr)
					if target == "allowed" {
						got := result(t, s.exec(t, fmt.Sprintf("curl -sS --max-time 20 http://127.0.0.1:%d/", dlPort)))
						if got["exitCode"] != 0.0 || got["stdout"] != "through the proxy" {
							t.Errorf("the allowlisted download: %v", got)
						}
					}
				})
			}
		})
	}
}

// acceptInto records what each connection to ln sends, as where.
func acceptInto(ln net.Listener, arr *arrivals, where string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var b [256]byte
			k, _ := c.Read(b[:])
			arr.note(where, "connection: "+string(b[:k]))
		}()
	}
}

// unixFrom checks what session s may still do with unix sockets: reach
// the socket its target lists, a socketpair, a server and client in its
// workspace (under the fallback too, where tandem lets a unix socket
// listen); and a racer that rewrites the address between a
// socket in the workspace and one outside, 2000 times, never reaches the
// outside one.
func unixFrom(t *testing.T, s sess, n *netTrap, ws, listed string, listedArr *arrivals) {
	t.Helper()
	var mb [8]byte
	_, _ = rand.Read(mb[:])
	marker := "unix" + hex.EncodeToString(mb[:])
	good := filepath.Join(ws, s.name+"-race.sock")
	var goodArr arrivals
	goodArr.seen = map[string][]string{}
	gln, err := net.Listen("unix", good)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gln.Close() })
	go acceptInto(gln, &goodArr, good)
	cfg, _ := json.Marshal(map[string]any{"marker": marker, "ws": ws, "listed": listed, "listen": true,
		"raceGood": good, "raceBad": n.unixStreams[0]})
	got := result(t, s.exec(t, "python3 attack.py unix '"+string(cfg)+"'", 120))
	var res map[string]string
	if err := json.Unmarshal([]byte(str(got["stdout"])), &res); err != nil {
		t.Fatalf("the unix checks did not run: %v %v", err, got)
	}
	t.Logf("unix: %v", res)
	want := map[string]string{"listed": "ok", "socketpair": "ok", "inside datagram": "ok", "inside stream": "ok"}
	for name, w := range want {
		if res[name] != w {
			t.Errorf("%s: %q, want %q", name, res[name], w)
		}
	}
	if !strings.HasPrefix(res["race"], "ok ") || res["race"] == "ok 0" {
		t.Errorf("the racer never reached the workspace socket: %q", res["race"])
	}
	for deadline := time.Now().Add(10 * time.Second); !listedArr.has(listed, marker); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing reached the listed socket %s", listed)
		}
	}
	n.settle(t)
	if c := n.caught(marker); len(c) > 0 {
		t.Errorf("the racer reached the outside socket:\n%s", strings.Join(c, "\n"))
	}
}

// containedFrom runs the attacks from session s and checks that nothing
// got out.
func containedFrom(t *testing.T, s sess, n *netTrap, ws string, namespace bool) {
	t.Helper()
	var mb [8]byte
	_, _ = rand.Read(mb[:])
	marker := "escape" + hex.EncodeToString(mb[:])
	cfg, _ := json.Marshal(map[string]any{"marker": marker, "tcp": n.tcp, "udp": n.udp, "dns": n.dns, "abstract": n.abstract,
		"unixStreams": n.unixStreams, "unixDgrams": n.unixDgrams})
	got := result(t, s.exec(t, "python3 attack.py attack '"+string(cfg)+"'", 120))
	var attempts map[string]string
	if err := json.Unmarshal([]byte(str(got["stdout"])), &attempts); err != nil || len(attempts) < 20 {
		t.Fatalf("the attacks did not run: %v %v", err, got)
	}
	for name, outcome := range attempts {
		t.Logf("%-40s %s", name, outcome)
		if !namespace && !strings.HasPrefix(outcome, "error") {
			t.Errorf("%s succeeded under the fallback filter", name)
		}
	}

	// What the session makes listen is not reachable from the host.
	portsFile := filepath.Join(ws, s.name+"-ports.json")
	res := result(t, s.exec(t, "python3 attack.py listen '"+string(cfg)+"' "+portsFile+" >/dev/null 2>&1 &"))
	if res["exitCode"] != 0.0 {
		t.Fatalf("starting the listeners: %v", res)
	}
	var ports map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(portsFile)
		if err == nil && json.Unmarshal(b, &ports) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session's listeners never said where they are: %v", err)
		}
	}
	for name, v := range ports {
		t.Logf("%-40s %v", name, v)
		hp, ok := v.([]any)
		if !ok {
			continue // it could not listen
		}
		if !namespace {
			t.Errorf("%s listens under the fallback filter: %v", name, hp)
		}
		addr := net.JoinHostPort(hp[0].(string), strconv.Itoa(int(hp[1].(float64))))
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			var b [64]byte
			k, _ := c.Read(b[:])
			_ = c.Close()
			if bytes.Contains(b[:k], []byte(marker)) {
				t.Errorf("%s: the session's listener on %s answered the host", name, addr)
			}
		} else {
			t.Logf("%s: from the host, %s: %v", name, addr, err)
		}
	}

	n.settle(t)
	if c := n.caught(marker); len(c) > 0 {
		t.Errorf("reached the test's listeners:\n%s", strings.Join(c, "\n"))
	}
}
