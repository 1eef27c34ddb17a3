package execguard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pathname unix sockets are files: a network namespace does not hold them,
// and Landlock restricts connecting to them only from ABI 9. The filter
// therefore sends every connect, sendmsg and sendmmsg, and every sendto
// that names an address, to tandem, which decides here.
//
// A connect is never continued in the kernel: it is made on the process's
// behalf. tandem takes a duplicate of the process's socket (pidfd_getfd)
// and connects that, so neither the address (which a second thread could
// rewrite after tandem read it: seccomp's documented time-of-check race)
// nor the descriptor (which it could swap for another socket) can change
// after the check. For a pathname, tandem resolves it in the process's own
// view, opens the socket file without following any link, checks that it
// lies under an allowed root and that the process may write it, and
// connects through /proc/self/fd/N of that file. An Internet stream
// socket may connect to the ports the rules allow, as Landlock's TCP rule
// (which looks at the caller, now tandem) says. An abstract address
// connects only from a network namespace of the session's own, which
// holds only the session's sockets: in tandem's namespace (the fallback,
// or network: true), tandem's connect would pass Landlock's scoping, so
// it is refused.
//
// Datagrams are checked and then continued: a destination outside the
// allowed roots fails with EACCES, but a second thread that rewrites the
// address (or swaps the descriptor) after the check races it.

// SocketRules are where a process tree's sockets may connect.
type SocketRules struct {
	// UnixRoots are the places where pathname unix sockets may connect:
	// each is a socket file, or a directory whose sockets (at any depth)
	// may be connected. Absolute paths, as the session sees them.
	UnixRoots []string
	// AnyTCP lets stream sockets of the Internet families connect to any
	// port (network: true).
	AnyTCP bool
	// TCPPorts, without AnyTCP, are the only ports those may connect to,
	// on any address: the session's port on the egress proxy. It is the
	// rule Landlock's TCP connect rule gives the session, kept by tandem
	// since tandem makes the connect.
	TCPPorts []uint16
}

// covers reports whether the resolved path name lies in one of the roots.
func (r SocketRules) covers(name string) bool {
	for _, root := range r.UnixRoots {
		if name == root || strings.HasPrefix(name, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// tcpAllowed reports whether a stream socket of family AF_INET or
// AF_INET6 may connect to addr. An address of another family (AF_UNSPEC
// disconnects) is the kernel's to refuse or accept.
func (r SocketRules) tcpAllowed(addr []byte) bool {
	if r.AnyTCP || len(addr) < 4 {
		return true
	}
	switch binary.LittleEndian.Uint16(addr) {
	case unix.AF_INET, unix.AF_INET6:
		return slices.Contains(r.TCPPorts, binary.BigEndian.Uint16(addr[2:4]))
	}
	return true
}

// AllowSockets sets where the process tree's sockets may connect. Each
// unix root is resolved as tandem sees it now, so that a symlinked root
// (/var/run) matches the path a connect resolves to. Call it before
// Serve; the zero rules refuse every pathname unix connect and every TCP
// one.
func (l *Listener) AllowSockets(r SocketRules) {
	roots := make([]string, 0, len(r.UnixRoots))
	for _, root := range r.UnixRoots {
		if !filepath.IsAbs(root) {
			continue
		}
		root = filepath.Clean(root)
		if e, err := filepath.EvalSymlinks(root); err == nil {
			root = e
		}
		roots = append(roots, root)
	}
	r.UnixRoots = roots
	r.TCPPorts = slices.Clone(r.TCPPorts)
	l.rules = r
}

// isSocketCall reports whether n is one of the socket syscalls the filter
// notifies (rather than an exec).
func isSocketCall(n notif) bool {
	a, _ := hostArchs()
	if n.Data.Arch != a.native.arch {
		return false
	}
	switch uint32(n.Data.Nr) {
	case a.native.connect, a.native.sendto, a.native.sendmsg, a.native.sendmmsg, a.native.listen:
		return true
	}
	return false
}

// socketCall decides one notified socket syscall and returns the answer
// to send. Anything it cannot read fails closed, with EACCES.
func (l *Listener) socketCall(rc rawConn, n notif) notifResp {
	cont := notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	fail := func(e unix.Errno) notifResp { return notifResp{ID: n.ID, Error: -int32(e)} }
	a, _ := hostArchs()
	pid := int(n.Pid)
	sock, err := takeFD(pid, int(int32(n.Data.Args[0])))
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) && errno == unix.EBADF {
			return fail(unix.EBADF)
		}
		return fail(unix.EACCES)
	}
	defer unix.Close(sock)
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fail(unix.ENOTSOCK) // what the kernel would say
	}
	own, err := ownNetns(pid)
	if err != nil {
		return fail(unix.EACCES)
	}
	if uint32(n.Data.Nr) == a.native.listen {
		// Only with Filter.Listens: a unix socket may serve (in the
		// workspace: its bind was Landlock's to allow); any other is
		// refused as the network fallback refuses it. The listen is made
		// on the duplicate, so a swapped descriptor changes nothing.
		if domain != unix.AF_UNIX {
			return fail(unix.EPERM)
		}
		if control(rc, func(fd int) error { return idValid(fd, n.ID) }) != nil {
			return fail(unix.EINTR)
		}
		err := unix.Listen(sock, int(int32(n.Data.Args[1])))
		var errno unix.Errno
		if err != nil && !errors.As(err, &errno) {
			errno = unix.EINVAL
		}
		return fail(errno)
	}
	m := mem{pid: pid}
	if uint32(n.Data.Nr) == a.native.connect {
		addr, err := readAddr(&m, n.Data.Args[1], n.Data.Args[2])
		if err != nil {
			return fail(unix.EFAULT)
		}
		if domain != unix.AF_UNIX {
			if domain == unix.AF_INET || domain == unix.AF_INET6 {
				typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
				if err != nil || (typ == unix.SOCK_STREAM && !l.rules.tcpAllowed(addr)) {
					return fail(unix.EACCES) // as Landlock refuses it
				}
			}
			return l.connectFor(rc, n.ID, sock, addr, -1)
		}
		dest, errno := l.unixDest(pid, addr, own)
		if errno != 0 {
			return fail(errno)
		}
		return l.connectFor(rc, n.ID, sock, addr, dest)
	}

	// A send: only a unix datagram socket goes where its address says.
	typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || domain != unix.AF_UNIX || typ != unix.SOCK_DGRAM {
		return cont
	}
	addrs, err := sendAddrs(&m, a, n)
	if err != nil {
		return fail(unix.EFAULT)
	}
	for _, addr := range addrs {
		dest, errno := l.unixDest(pid, addr, own)
		if errno != 0 {
			return fail(errno)
		}
		if dest >= 0 {
			_ = unix.Close(dest)
		}
	}
	return cont
}

// uioMaxIOV is UIO_MAXIOV, the most messages one sendmmsg sends.
const uioMaxIOV = 1024

// sockaddrStorage is the most the kernel reads of a socket address.
const sockaddrStorage = 128

// readAddr reads a socket address of length n at ptr. A length the kernel
// would refuse is returned as read (the kernel's own check then fails it).
func readAddr(m *mem, ptr, n uint64) ([]byte, error) {
	n = min(uint64(uint32(n)), sockaddrStorage)
	if ptr == 0 || n == 0 {
		return nil, nil
	}
	b := make([]byte, n)
	if err := m.read(ptr, b); err != nil {
		return nil, err
	}
	return b, nil
}

// sendAddrs reads the destination addresses of a sendto, sendmsg or
// sendmmsg (nil for a message without one).
func sendAddrs(m *mem, a archs, n notif) ([][]byte, error) {
	const mmsghdr = 64 // struct mmsghdr on 64-bit Linux; msg_name, msg_namelen lead it
	readName := func(at uint64) ([]byte, error) {
		var h [16]byte // msg_name, msg_namelen
		if err := m.read(at, h[:]); err != nil {
			return nil, err
		}
		return readAddr(m, binary.LittleEndian.Uint64(h[:8]), uint64(binary.LittleEndian.Uint32(h[8:12])))
	}
	switch uint32(n.Data.Nr) {
	case a.native.sendto:
		b, err := readAddr(m, n.Data.Args[4], n.Data.Args[5])
		return [][]byte{b}, err
	case a.native.sendmsg:
		b, err := readName(n.Data.Args[1])
		return [][]byte{b}, err
	case a.native.sendmmsg:
		vlen := min(uint32(n.Data.Args[2]), uioMaxIOV)
		var out [][]byte
		for i := range uint64(vlen) {
			b, err := readName(n.Data.Args[1] + i*mmsghdr)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected syscall %d", n.Data.Nr)
}

// unixDest checks a unix socket address the process named. For a
// pathname inside the rules it returns dest, the socket file opened O_PATH
// (the caller closes it); for an abstract or unnamed address, -1 (allowed
// only in a namespace of the session's own: own); otherwise the errno to
// fail the call with.
func (l *Listener) unixDest(pid int, addr []byte, own bool) (dest int, _ unix.Errno) {
	if len(addr) < 2 || binary.LittleEndian.Uint16(addr) != unix.AF_UNIX {
		return -1, 0 // the kernel refuses another family on a unix socket
	}
	if len(addr) > int(unsafe.Sizeof(unix.RawSockaddrUnix{})) {
		return -1, unix.EINVAL // as the kernel says of it
	}
	sunPath := addr[2:]
	if len(sunPath) == 0 || sunPath[0] == 0 {
		if !own {
			return -1, unix.EACCES
		}
		return -1, 0
	}
	if i := strings.IndexByte(string(sunPath), 0); i >= 0 {
		sunPath = sunPath[:i]
	}
	return l.openSocket(pid, string(sunPath))
}

// openSocket resolves path in the process's view and opens the socket
// file it names with O_PATH, if it lies under the rules' roots.
func (l *Listener) openSocket(pid int, path string) (int, unix.Errno) {
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return -1, unix.EACCES
	}
	v := view{pid: pid, cwd: cwd}
	name, _, err := v.resolve(path)
	if err != nil {
		// Whether a path outside exists is not the session's to learn
		// (Landlock hides /tmp and /home from it).
		lexical := path
		if !strings.HasPrefix(lexical, "/") {
			lexical = cwd + "/" + lexical
		}
		var errno unix.Errno
		if errors.As(err, &errno) && l.rules.covers(filepath.Clean(lexical)) {
			return -1, errno
		}
		return -1, unix.EACCES
	}
	if !strings.HasPrefix(name, "/") || !l.rules.covers(name) {
		return -1, unix.EACCES
	}
	root, err := unix.Open(v.proc()+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.EACCES
	}
	defer unix.Close(root)
	// name has every link resolved: a link found now was put there since.
	fd, err := unix.Openat2(root, strings.TrimPrefix(name, "/"), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) && errno == unix.ENOENT {
			return -1, unix.ENOENT
		}
		return -1, unix.EACCES
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		_ = unix.Close(fd)
		return -1, unix.ECONNREFUSED // what connect says of a file that is not a socket
	}
	if !mayWrite(pid, &st) {
		_ = unix.Close(fd)
		return -1, unix.EACCES
	}
	return fd, 0
}

// mayWrite reports whether the process may write the file st (connecting
// to a socket file needs that), by its file-system ids and groups: tandem,
// which connects for it, may be root.
func mayWrite(pid int, st *unix.Stat_t) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	var uid, gid int64 = -1, -1
	var groups []int64
	var capEff uint64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		switch k {
		case "Uid":
			if len(f) == 4 {
				uid, _ = strconv.ParseInt(f[3], 10, 64)
			}
		case "Gid":
			if len(f) == 4 {
				gid, _ = strconv.ParseInt(f[3], 10, 64)
			}
		case "Groups":
			for _, g := range f {
				n, _ := strconv.ParseInt(g, 10, 64)
				groups = append(groups, n)
			}
		case "CapEff":
			if len(f) == 1 {
				capEff, _ = strconv.ParseUint(f[0], 16, 64)
			}
		}
	}
	const capDacOverride = 1
	switch {
	case uid < 0 || gid < 0:
		return false
	case capEff&(1<<capDacOverride) != 0:
		return true
	case int64(st.Uid) == uid:
		return st.Mode&0o200 != 0
	case int64(st.Gid) == gid || containsID(groups, int64(st.Gid)):
		return st.Mode&0o020 != 0
	}
	return st.Mode&0o002 != 0
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// connectFor connects sock (a duplicate of the process's socket) to dest
// (a checked socket file opened O_PATH, closed here, through
// /proc/self/fd) or, when dest is -1, to addr as the process gave it, and
// answers with the result. The notification must still be waiting, or the
// socket may no longer be the process's.
func (l *Listener) connectFor(rc rawConn, id uint64, sock int, addr []byte, dest int) notifResp {
	if dest >= 0 {
		defer unix.Close(dest)
		via := "/proc/self/fd/" + strconv.Itoa(dest)
		addr = make([]byte, 2+len(via)+1)
		binary.LittleEndian.PutUint16(addr, unix.AF_UNIX)
		copy(addr[2:], via)
	}
	if control(rc, func(fd int) error { return idValid(fd, id) }) != nil {
		return notifResp{ID: id, Error: -int32(unix.EINTR)}
	}
	var p unsafe.Pointer
	if len(addr) > 0 {
		p = unsafe.Pointer(&addr[0])
	}
	_, _, errno := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(p), uintptr(len(addr)))
	return notifResp{ID: id, Error: -int32(errno)}
}

// takeFD duplicates the process's descriptor fd into tandem. pid is the
// thread a seccomp notification names, which need not lead its thread
// group (a Go program connects from any of its threads): pidfd_open
// refuses such a thread without PIDFD_THREAD (Linux 6.9), so it is opened
// as a thread, or else its group's leader is, whose descriptor table its
// threads share.
func takeFD(pid, fd int) (int, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil { // EINVAL, or ENOENT on recent kernels, for such a thread
		if pidfd, err = unix.PidfdOpen(pid, pidfdThread); err != nil {
			if tgid, terr := threadGroup(pid); terr == nil {
				pidfd, err = unix.PidfdOpen(tgid, 0)
			}
		}
	}
	if err != nil {
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_getfd %d of %d: %w", fd, pid, err)
	}
	return dup, nil
}

// pidfdThread is PIDFD_THREAD (O_EXCL): pidfd_open of a thread that does
// not lead its group.
const pidfdThread = unix.O_EXCL

// threadGroup returns the thread group (process) id of thread tid.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no Tgid", tid)
}

// ownNetns reports whether the process lives in a network namespace other
// than tandem's (a namespace of the session's own).
func ownNetns(pid int) (bool, error) {
	var mine, its unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &mine); err != nil {
		return false, err
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &its); err != nil {
		return false, err
	}
	return mine.Ino != its.Ino || mine.Dev != its.Dev, nil
}
