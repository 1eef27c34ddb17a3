package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/fdpass"
)

// Reaching a port inside a session's network namespace.
//
// A socket belongs to the network namespace of the process that created
// it, whoever connects it later. So tandem reaches a port of the session
// (a preview of the agent's dev server) with a socket made inside the
// namespace: before it execs the shell, the launcher starts a socket
// helper there ("self __sandbox --socket-helper"), which makes one
// unconnected TCP socket per request and sends it to tandem (SCM_RIGHTS).
// tandem connects it to 127.0.0.1:port itself. This works whether or not
// tandem is root, where joining the namespace (setns) would need
// CAP_SYS_ADMIN in tandem's own user namespace, and it gives the session
// nothing: the helper only makes sockets in the namespace the session
// already has, and it listens to tandem alone.
//
// The helper drops every capability and confines itself with a Landlock
// domain of its own that grants nothing but the terminal devices, so the
// shell (in a sibling domain) can neither trace nor signal it. It ends
// when tandem closes its end, or with the shell (parent-death signal).

// socketHelperArg, as the launcher's only argument, makes it the socket
// helper, with the socket to tandem as descriptor 3.
const socketHelperArg = "--socket-helper"

// Requests on a socket helper's socket, one byte each; the answer is one
// unconnected TCP socket of that family.
const (
	socketRequest4 = '4'
	socketRequest6 = '6'
)

// SocketPair returns the two ends of the socket that carries a socket
// helper's requests and sockets (Policy.SocketFD; fdpass.Pair).
func SocketPair() (parent, child *os.File, err error) {
	return fdpass.Pair("sockets")
}

// startSocketHelper starts the socket helper in the launcher's namespace
// with sock as its descriptor 3, and closes the launcher's copy. It runs
// on the launcher's locked thread, the one that later execs the shell:
// the helper's parent-death signal follows that thread, so it fires when
// the shell ends, not before.
func startSocketHelper(sock int) error {
	f := os.NewFile(uintptr(sock), "sockets-child")
	defer f.Close()
	// The running binary itself, even if its file was replaced since.
	cmd := exec.Command("/proc/self/exe", ArgName, socketHelperArg)
	cmd.Args[0] = "tandem" // what ps shows in the session: "tandem __sandbox --socket-helper"
	cmd.ExtraFiles = []*os.File{f}
	// The launcher's other descriptors (the proxy's and the exec
	// filter's socket pairs, what tandem's parent leaked) are not the
	// helper's: a copy would keep tandem from seeing the launcher close
	// them. (The launcher marks them so before the shell's exec anyway.)
	if err := MarkInheritedCloseOnExec(); err != nil {
		return fmt.Errorf("socket helper: close inherited descriptors: %w", err)
	}
	// A session of its own: no controlling terminal, so the shell's
	// Ctrl-C, hangups and job control never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("socket helper: %w", err)
	}
	// The shell becomes its parent and reaps it.
	return cmd.Process.Release()
}

// socketHelper is the helper's body: confine itself, then answer each
// request on descriptor 3 with a fresh unconnected TCP socket, until
// tandem closes its end.
func socketHelper() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	const sock = 3
	if _, err := unix.FcntlInt(sock, unix.F_GETFD, 0); err != nil {
		return fail(exitRefused, fmt.Errorf("socket helper: no socket to tandem: %w", err))
	}
	// Landlock applies to every thread (TSYNC); capabilities are per
	// thread, but the helper never execs, and it has no file or network
	// right to use them with.
	if err := restrict(kernelABI(), Policy{}); err != nil {
		return fail(exitRefused, fmt.Errorf("socket helper: landlock: %w", err))
	}
	if err := dropCapabilities(); err != nil {
		return fail(exitRefused, fmt.Errorf("socket helper: drop capabilities: %w", err))
	}
	var req [1]byte
	for {
		n, err := unix.Read(sock, req[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n != 1 || err != nil {
			return 0 // tandem closed its end: the session is over
		}
		family := unix.AF_INET
		if req[0] == socketRequest6 {
			family = unix.AF_INET6
		}
		fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			// An empty message tells tandem no socket came.
			_ = unix.Sendmsg(sock, []byte{'E'}, nil, nil, 0)
			continue
		}
		err = fdpass.Send(sock, fd)
		_ = unix.Close(fd)
		if err != nil {
			return 0
		}
	}
}

// Sockets is tandem's end of a session's socket helper: it dials ports on
// the session's loopback, inside its namespace. Safe for concurrent use.
type Sockets struct {
	mu sync.Mutex // one request and its answer at a time
	f  *os.File
}

// NewSockets wraps parent, the end of a SocketPair whose child went to
// the launcher as Policy.SocketFD. Sockets owns it from here.
func NewSockets(parent *os.File) *Sockets { return &Sockets{f: parent} }

// Close ends the helper (it sees its socket close).
func (s *Sockets) Close() error { return s.f.Close() }

// dialTimeout bounds a connect on the namespace's loopback: it answers at
// once unless the listener's queue is full.
const dialTimeout = 10 * time.Second

// Dial connects to 127.0.0.1:port inside the session's namespace, with a
// socket the helper made there.
func (s *Sockets) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("dial session port %d: out of range", port)
	}
	fd, err := s.socket(ctx)
	if err != nil {
		return nil, fmt.Errorf("dial session port %d: %w", port, err)
	}
	c, err := connectSocket(ctx, fd, port)
	if err != nil {
		return nil, fmt.Errorf("dial session port %d: %w", port, err)
	}
	return c, nil
}

// socket asks the helper for one socket and checks that it is what was
// asked for: an unconnected IPv4 TCP socket.
func (s *Sockets) socket(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write([]byte{socketRequest4}); err != nil {
		return -1, fmt.Errorf("ask the socket helper: %w", err)
	}
	fd, err := fdpass.Receive(ctx, s.f)
	if err != nil {
		return -1, fmt.Errorf("socket helper: %w", err)
	}
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	_, err3 := unix.Getpeername(fd)
	if err1 != nil || err2 != nil || dom != unix.AF_INET || typ != unix.SOCK_STREAM || !errors.Is(err3, unix.ENOTCONN) {
		_ = unix.Close(fd)
		return -1, errors.New("the socket helper sent something other than an unconnected TCP socket")
	}
	return fd, nil
}

// connectSocket connects fd to 127.0.0.1:port, waiting until ctx ends or
// dialTimeout, and returns it as a net.Conn. fd is consumed.
func connectSocket(ctx context.Context, fd, port int) (net.Conn, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "session-port")
	defer f.Close()
	err := unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	if errors.Is(err, unix.EINPROGRESS) {
		deadline := time.Now().Add(dialTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		_ = f.SetWriteDeadline(deadline)
		stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
		defer stop()
		rc, rerr := f.SyscallConn()
		if rerr != nil {
			return nil, rerr
		}
		var soErr int
		werr := rc.Write(func(fd uintptr) bool {
			soErr, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			return err != nil || soErr != 0 || connected(int(fd))
		})
		switch {
		case werr != nil:
			return nil, fmt.Errorf("connect: %w", werr)
		case err != nil:
			return nil, fmt.Errorf("connect: %w", err)
		case soErr != 0:
			return nil, fmt.Errorf("connect: %w", syscall.Errno(soErr))
		}
	} else if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return net.FileConn(f)
}

// connected reports whether fd has a peer yet.
func connected(fd int) bool {
	_, err := unix.Getpeername(fd)
	return err == nil
}
