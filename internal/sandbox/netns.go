package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/fdpass"
)

// NetLayer names what keeps a sandboxed session off the network.
type NetLayer string

// The layers, strongest first.
const (
	// NetNamespace: the session has a network namespace of its own, with
	// only its own loopback (and, with an allowlist, the proxy's port on
	// it). Landlock's TCP rules apply inside as a second layer.
	NetNamespace NetLayer = "namespace"
	// NetSeccomp: the host refuses namespaces; the session shares the
	// host's network under Landlock's TCP rules and the fallback seccomp
	// filter (netfilter.go).
	NetSeccomp NetLayer = "seccomp"
	// NetHost: the target sets network: true; nothing is restricted.
	NetHost NetLayer = "host"
)

// ErrNoNamespace is wrapped by ProbeNamespace's error when this host
// cannot give a session a network namespace of its own (the kernel or a
// container's seccomp profile refuses clone(CLONE_NEWNET), or user
// namespaces where tandem is not root). Sessions then run under the
// fallback filter.
var ErrNoNamespace = errors.New("network namespaces unavailable")

// probeArg, as the launcher's only argument, makes it bring its
// namespace's loopback up and exit: what ProbeNamespace runs.
const probeArg = "--probe-netns"

// namespaceAttr is what the launcher is cloned with to get a network
// namespace of its own. tandem as root needs CLONE_NEWNET only; otherwise
// a user namespace that maps tandem's own uid and gid to themselves (the
// shell keeps its identity and file ownership) and owns the network
// namespace, with CAP_NET_ADMIN kept across the launcher's exec (ambient)
// so it can bring lo up. The launcher drops every capability before the
// shell starts. creack/pty adds Setsid and Setctty to this.
func namespaceAttr() *syscall.SysProcAttr {
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	}
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWNET | syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		AmbientCaps: []uintptr{unix.CAP_NET_ADMIN},
	}
}

// ProbeNamespace reports whether this host lets the launcher self run in
// a network namespace of its own and bring its loopback up: it starts
// "self __sandbox --probe-netns" as Command would. The error wraps
// ErrNoNamespace and says what refused. It takes a few milliseconds; call
// it once per process.
func ProbeNamespace(ctx context.Context, self string) error {
	cmd := exec.CommandContext(ctx, self, ArgName, probeArg)
	cmd.SysProcAttr = namespaceAttr()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var errno syscall.Errno
	switch {
	case err == nil:
		return nil
	case errors.As(err, &errno):
		return fmt.Errorf("%w: the kernel refused a new network namespace: %w", ErrNoNamespace, err)
	default:
		return fmt.Errorf("%w: %w (%s)", ErrNoNamespace, err, bytes.TrimSpace(stderr.Bytes()))
	}
}

// upLoopback brings lo up in the launcher's new network namespace: the
// kernel gives it 127.0.0.1 and ::1 then. Needs CAP_NET_ADMIN there.
func upLoopback() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: bring up: %w", err)
	}
	return nil
}

// onlyLoopback checks that the launcher's network namespace has no
// address but loopback ones: that it is not the host's. (A fresh
// namespace may hold the fallback devices of tunnel modules, sit0 or
// tunl0, which are down and have none.)
func onlyLoopback() error {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("network namespace: list addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); !ok || !ip.IP.IsLoopback() {
			return fmt.Errorf("network namespace: %v is not a loopback address: the launcher is not in a namespace of its own", a)
		}
	}
	return nil
}

// listenProxy binds and listens on 127.0.0.1:port of the launcher's
// namespace: the session's port on tandem's egress proxy. It runs before
// Landlock, which would deny the bind.
func listenProxy(port uint16) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, fmt.Errorf("proxy port: socket: %w", err)
	}
	sa := &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("proxy port: bind 127.0.0.1:%d: %w", port, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("proxy port: listen: %w", err)
	}
	return fd, nil
}

// handOverProxy makes the proxy's listener in the namespace and sends it
// to tandem over descriptor sock (closing both here).
func handOverProxy(port uint16, sock int) error {
	fd, err := listenProxy(port)
	if err != nil {
		_ = unix.Close(sock)
		return err
	}
	err = fdpass.Send(sock, fd)
	if err != nil {
		err = fmt.Errorf("proxy port: send listener: %w", err)
	}
	return errors.Join(err, unix.Close(fd), unix.Close(sock))
}

// ProxyPair returns the two ends of the socket that carries the proxy's
// listener from the launcher to tandem (Policy.ProxyFD; fdpass.Pair).
func ProxyPair() (parent, child *os.File, err error) {
	return fdpass.Pair("proxy")
}

// ReceiveProxy reads the listener the launcher made inside the session's
// namespace from parent, waiting until ctx ends. A launcher that exits
// without sending it (it refused to run) makes it fail at once.
func ReceiveProxy(ctx context.Context, parent *os.File) (net.Listener, error) {
	fd, err := fdpass.Receive(ctx, parent)
	if err != nil {
		return nil, fmt.Errorf("proxy port: receive listener: %w", err)
	}
	f := os.NewFile(uintptr(fd), "proxy-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("proxy port: %w", err)
	}
	return ln, nil
}
