// Package sandbox confines a program with Landlock, and keeps it off the
// network, before it runs.
//
// Landlock restricts the calling process and everything it later starts,
// and it cannot be lifted. tandem must stay unrestricted, so it confines a
// shell by re-executing its own binary as a tiny launcher ("tandem
// __sandbox ..."), which applies the policy to itself and then execs the
// shell. Command builds that re-exec; Main is the launcher.
//
// The network is kept by removing it rather than by filtering calls: with
// the network off, Command clones the launcher into a network namespace of
// its own (netns.go), whose only interface is its loopback; the launcher
// brings that up and, for a session with an allowlist, listens there on
// the egress proxy's port and hands the listener to tandem. Landlock's TCP
// rules stay as a second layer. Where a host refuses namespaces, a seccomp
// filter (netfilter.go) refuses what those rules do not see: other socket
// protocols, TCP Fast Open, listen, io_uring. It does not know what tandem
// serves on the proxy's port, nor who decides the policy.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// ArgName is the first argument that turns a tandem binary (or a test
// binary) into the sandbox launcher. Entry points check
// os.Args[1] == ArgName and hand os.Args[2:] to Main.
const ArgName = "__sandbox"

// ErrUnsupported is wrapped by every error that says the running kernel
// cannot enforce a Policy. Callers match it to refuse sandboxed targets up
// front rather than run them with weaker isolation than configured.
var ErrUnsupported = errors.New("kernel cannot enforce the sandbox")

// minNetABI is the first Landlock ABI that can restrict TCP bind/connect.
const minNetABI = 4

// Policy is what a sandboxed program may touch. Everything not granted is
// denied: files outside ReadWrite and ReadOnly, and TCP unless Network.
// The scope is fixed when the program starts and can never widen.
type Policy struct {
	// ReadWrite lists absolute paths (directories or files) the program
	// may read, write, create in, delete from and execute. Each must exist.
	ReadWrite []string `json:"rw,omitempty"`
	// ReadOnly lists absolute paths the program may read and execute.
	// Paths that do not exist are skipped: there is nothing to read.
	ReadOnly []string `json:"ro,omitempty"`
	// Network allows TCP bind and connect. When false, Landlock denies
	// both for every port (and, on kernels with Landlock ABI 10+, UDP as
	// well); Namespace or NetFilter then keeps the rest of the network.
	Network bool `json:"net,omitempty"`
	// ConnectPorts, with Network false, are TCP ports the program may
	// still connect to: the session's port on tandem's egress proxy.
	// Landlock rules name a port, not an address: the port is allowed on
	// every address. Binding stays denied.
	ConnectPorts []uint16 `json:"connect,omitempty"`
	// ExecFD, when non-zero, installs the execguard filter: the launcher
	// sends its listener over the socket that is its descriptor ExecFD (an
	// execguard.Pair child end, passed as an ExtraFile: ExtraFiles[i] is
	// descriptor 3+i). Every connect and every send to an address of the
	// shell's tree then waits for tandem (pathname unix sockets are
	// checked there), and, unless ExecsUnjudged, every program it starts
	// waits for tandem's verdict. A launcher that cannot install the filter
	// refuses to run the program. Zero: no filter.
	ExecFD int `json:"execfd,omitempty"`
	// ExecsUnjudged, with ExecFD, lets execs run without tandem's verdict:
	// the filter then keeps sockets only.
	ExecsUnjudged bool `json:"noexecs,omitempty"`
	// Namespace, with Network false, runs the program in a network
	// namespace of its own: Command clones the launcher into one, and the
	// launcher brings its loopback up. Nothing outside it is reachable:
	// not the host's loopback, other addresses, abstract UNIX sockets of
	// other namespaces, whatever the protocol.
	Namespace bool `json:"netns,omitempty"`
	// ProxyPort and ProxyFD, with Namespace, make the launcher listen on
	// 127.0.0.1:ProxyPort inside the namespace and send that listener to
	// tandem over the socket that is its descriptor ProxyFD (a ProxyPair
	// child end, passed as an ExtraFile): tandem serves the session's
	// egress proxy on it, so the proxy is the only way out. Landlock then
	// allows connecting to ProxyPort (put it in ConnectPorts).
	ProxyPort uint16 `json:"proxyport,omitempty"`
	ProxyFD   int    `json:"proxyfd,omitempty"`
	// SocketFD, with Namespace, starts a socket helper in the namespace
	// (sockets.go) that answers tandem over the socket that is its
	// descriptor SocketFD (a SocketPair child end, passed as an
	// ExtraFile): tandem reaches the session's ports (previews) through
	// it. Zero: no helper.
	SocketFD int `json:"sockfd,omitempty"`
	// NetFilter, with Network false, installs the fallback seccomp filter
	// (netfilter.go) for hosts that refuse namespaces: no socket but TCP
	// for the Internet families, no Fast Open, no listen, no io_uring.
	NetFilter bool `json:"netfilter,omitempty"`
}

// DefaultReadOnly returns the system directories a shell needs to find and
// run programs, libraries and configuration. The shared temp directories
// (/tmp, /var/tmp, /dev/shm) are deliberately absent: other sessions' and
// other programs' files live there, so each session gets a private TMPDIR
// instead. /var is granted child by child for the same reason. Home
// directories (/root, /home) are absent too, and so is /dev: the launcher
// grants the harmless terminal and null devices one by one rather than the
// whole of /dev, which holds raw disks and memory devices.
func DefaultReadOnly() []string {
	ro := []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
		"/etc", "/opt", "/proc", "/sys",
	}
	ro = append(ro, childrenExcept("/var", "tmp")...)
	// /run/user holds login sessions' runtime dirs: agent sockets, keyrings.
	return append(ro, childrenExcept("/run", "user")...)
}

// childrenExcept lists dir's entries except the one named skip, and
// except symlinks: a rule on a symlink grants its target (/run/shm is
// /dev/shm, /var/run is /run), which is reached through its own rule if
// it is granted at all.
func childrenExcept(dir, skip string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Name() != skip && e.Type()&fs.ModeSymlink == 0 {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// Covers reports whether a path granted to a sandbox (dir, read-only or
// read-write) gives access to target: target is dir or lies under it. Both
// are compared after resolving symlinks where they exist.
func Covers(dir, target string) bool {
	dir, target = resolved(dir), resolved(target)
	rel, err := filepath.Rel(dir, target)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

// resolved is p with symlinks resolved as far as the path exists.
func resolved(p string) string {
	p = filepath.Clean(p)
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if parent := filepath.Dir(p); parent != p {
		return filepath.Join(resolved(parent), filepath.Base(p))
	}
	return p
}

// Command returns the command that runs argv confined by p: self (the
// absolute path of the tandem executable, or of a test binary whose
// TestMain dispatches ArgName to Main) re-executed as
// "self __sandbox <policy as JSON> -- argv...". The policy is not secret;
// it is visible in the launcher's argv only until the exec of argv[0].
// The caller sets Dir, Env and the standard streams as for any command.
func Command(self string, p Policy, argv []string) (*exec.Cmd, error) {
	if !filepath.IsAbs(self) {
		return nil, fmt.Errorf("sandbox command: launcher path %q is not absolute", self)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("sandbox command: no program to run")
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("sandbox command: %w", err)
	}
	enc, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("sandbox command: encode policy: %w", err)
	}
	args := append([]string{ArgName, string(enc), "--"}, argv...)
	cmd := exec.Command(self, args...)
	if p.Namespace {
		cmd.SysProcAttr = namespaceAttr()
	}
	return cmd, nil
}

// Supported reports whether the running kernel can enforce p in full. It
// lets callers refuse sandboxed targets with a clear message before
// starting anything; Main performs the same check and refuses to run the
// program when it fails. The error wraps ErrUnsupported.
func (p Policy) Supported() error {
	return requirement(kernelABI(), p)
}

// kernelABI returns the Landlock ABI version of the running kernel, or 0
// when Landlock is missing or disabled.
func kernelABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// requirement is the refusal rule: Landlock must exist, and a policy that
// turns the network off needs an ABI that can restrict TCP. Anything less
// would silently run the program with weaker isolation than configured.
func requirement(abi int, p Policy) error {
	if abi < 1 {
		return fmt.Errorf("%w: Landlock is not available (it needs Linux 5.13+ with landlock enabled in the lsm= boot parameter)", ErrUnsupported)
	}
	if !p.Network && abi < minNetABI {
		return fmt.Errorf("%w: Landlock ABI %d cannot restrict TCP (ABI %d, Linux 6.7+, is needed) and the policy turns the network off", ErrUnsupported, abi, minNetABI)
	}
	return nil
}

// validate rejects relative paths: the launcher resolves paths in its own
// working directory, which is the program's, not the caller's.
func (p Policy) validate() error {
	if p.ExecFD != 0 && p.ExecFD < 3 {
		return fmt.Errorf("exec judging descriptor %d is one of the standard streams", p.ExecFD)
	}
	switch {
	case p.Network && (p.Namespace || p.NetFilter):
		return errors.New("a policy with network on needs no network namespace or filter")
	case p.ExecsUnjudged && p.ExecFD == 0:
		return errors.New("execs unjudged is a mode of the exec filter: it needs its descriptor")
	case p.Namespace && p.NetFilter:
		return errors.New("the network filter is the fallback for hosts without namespaces: not both")
	case (p.ProxyFD != 0 || p.ProxyPort != 0) && (!p.Namespace || p.ProxyFD < 3 || p.ProxyPort == 0 || p.ProxyFD == p.ExecFD):
		return fmt.Errorf("a proxy listener needs a namespace, a port and a descriptor of its own above the standard streams (port %d, descriptor %d)", p.ProxyPort, p.ProxyFD)
	case p.SocketFD != 0 && (!p.Namespace || p.SocketFD < 3 || p.SocketFD == p.ExecFD || p.SocketFD == p.ProxyFD):
		return fmt.Errorf("a socket helper needs a namespace and a descriptor of its own above the standard streams (descriptor %d)", p.SocketFD)
	}
	for _, set := range [][]string{p.ReadWrite, p.ReadOnly} {
		for _, path := range set {
			if !filepath.IsAbs(path) {
				return fmt.Errorf("policy path %q is not absolute", path)
			}
		}
	}
	return nil
}
