package sandbox

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// filterPy makes one call of each kind the fallback filter judges, the
// foreign ABIs included (i386 through int 0x80, x32 through its syscall
// bit), and prints what each returned: "ok" or the errno's name.
const filterPy = `
import ctypes, errno, json, mmap, os, socket, struct
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
def sock(f, t, p=0):
    socket.socket(f, t, p).close()
def listen_unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(os.environ["TMPDIR"], "s"))
    s.listen(1)
def sockopt(level, name):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(level, name, 1)
    finally:
        s.close()
def fastopen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", 9))
    finally:
        s.close()
libc = ctypes.CDLL(None, use_errno=True)
def raw_syscall(nr, *args):
    r = libc.syscall(nr, *args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    os.close(r)
def int80(nr, a=0, b=0, c=0):
    code = b"\x53\xb8" + struct.pack("<I", nr) + b"\xbb" + struct.pack("<I", a) + b"\xb9" + struct.pack("<I", b)
    code += b"\xba" + struct.pack("<I", c) + b"\xcd\x80\x5b\xc3"
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    r = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    if r < 0:
        raise OSError(-r, os.strerror(-r))
    if nr == 359:
        os.close(r)
attempt("tcp socket", lambda: sock(socket.AF_INET, socket.SOCK_STREAM))
attempt("tcp6 socket nonblocking", lambda: sock(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_TCP))
attempt("udp socket", lambda: sock(socket.AF_INET, socket.SOCK_DGRAM))
attempt("udp6 socket", lambda: sock(socket.AF_INET6, socket.SOCK_DGRAM))
attempt("mptcp socket", lambda: sock(socket.AF_INET, socket.SOCK_STREAM, 262))
attempt("raw socket", lambda: sock(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("vsock socket", lambda: sock(40, socket.SOCK_STREAM))
attempt("unix socketpair", lambda: [s.close() for s in socket.socketpair()])
attempt("netlink socket", lambda: sock(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt("unix listen", listen_unix)
attempt("TCP_NODELAY", lambda: sockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
attempt("TCP_FASTOPEN_CONNECT", lambda: sockopt(socket.IPPROTO_TCP, 30))
attempt("MSG_FASTOPEN", fastopen)
attempt("io_uring_setup", lambda: raw_syscall(425, 4, ctypes.create_string_buffer(120)))
attempt("x32 socket", lambda: raw_syscall(0x40000000 | 41, 2, 1, 0))
attempt("i386 tcp socket", lambda: int80(359, 2, 1, 0))
attempt("i386 udp socket", lambda: int80(359, 2, 2, 0))
attempt("i386 socketcall", lambda: int80(102, 1, 0, 0))
print(json.dumps(res))
`

// TestMainNetFilter: under the fallback filter, what Landlock's TCP rules
// do not see is refused, through the native ABI and the foreign ones
// alike, while TCP sockets, UNIX socket pairs and netlink still work; the
// same calls without the filter show each refusal is the filter's.
func TestMainNetFilter(t *testing.T) {
	if err := (Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the calls through foreign ABIs are written for amd64")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	want := map[string][2]string{ // without the filter, with it
		"tcp socket":              {"ok", "ok"},
		"tcp6 socket nonblocking": {"ok", "ok"},
		"udp socket":              {"ok", "EPERM"},
		"udp6 socket":             {"ok", "EPERM"},
		"mptcp socket":            {"ok", "EPERM"},
		"raw socket":              {"EPERM", "EPERM"}, // no CAP_NET_RAW either way
		"vsock socket":            {"", "EPERM"},
		"unix socketpair":         {"ok", "ok"},
		"netlink socket":          {"ok", "ok"},
		"unix listen":             {"ok", "EPERM"},
		"TCP_NODELAY":             {"ok", "ok"},
		"TCP_FASTOPEN_CONNECT":    {"ok", "EPERM"},
		"MSG_FASTOPEN":            {"", "EPERM"},
		"io_uring_setup":          {"ok", "EPERM"},
		"x32 socket":              {"", "ENOSYS"},
		"i386 tcp socket":         {"ok", "ok"},
		"i386 udp socket":         {"ok", "EPERM"},
		"i386 socketcall":         {"EFAULT", "EPERM"},
	}
	for i, filter := range []bool{false, true} {
		tmp := t.TempDir()
		p := Policy{ReadWrite: []string{tmp}, ReadOnly: DefaultReadOnly(), NetFilter: filter}
		cmd, err := Command(self, p, []string{"python3", "-c", filterPy})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("filter %v: %v\n%s", filter, err, out)
		}
		var got map[string]string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("filter %v: %v: %s", filter, err, out)
		}
		for name, w := range want {
			if w[i] != "" && got[name] != w[i] {
				t.Errorf("filter %v: %s: %s, want %s", filter, name, got[name], w[i])
			}
		}
	}
}
