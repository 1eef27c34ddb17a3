package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// Exit codes of Main when it cannot run the program, following env(1) and
// timeout(1): the program's own exit codes pass through untouched.
const (
	exitRefused  = 125 // bad arguments, or the sandbox cannot be applied
	exitNoExec   = 126 // the program exists but could not be executed
	exitNotFound = 127 // the program was not found on PATH
)

// Main is the sandbox launcher: the body of "tandem __sandbox <policy> --
// argv...", given the arguments after ArgName. It applies the policy with
// Landlock at the kernel's best ABI, drops all capabilities, and execs
// argv[0] (looked up on PATH) with the launcher's environment. It returns
// only on failure, with a message on stderr and exit code 125 when the
// sandbox cannot be set up: it never runs the program less confined than
// the policy says.
func Main(args []string) int {
	if len(args) == 1 && args[0] == probeArg {
		if err := upLoopback(); err != nil {
			return fail(exitRefused, err)
		}
		if err := onlyLoopback(); err != nil {
			return fail(exitRefused, err)
		}
		return 0
	}
	if len(args) > 0 && args[0] == filesArg {
		return serveFiles(args[1:])
	}
	p, argv, err := parseArgs(args)
	if err != nil {
		return fail(exitRefused, err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail(exitNotFound, err)
	}

	// Capabilities are per thread and execve keeps the caller's thread, so
	// the thread that drops them must be the one that execs.
	runtime.LockOSThread()
	abi := kernelABI()
	if err := requirement(abi, p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to run %s: %w", argv[0], err))
	}
	if err := isolateNetwork(p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to run %s: %w", argv[0], err))
	}
	if err := restrict(abi, p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to run %s: apply landlock: %w", argv[0], err))
	}
	if err := dropCapabilities(); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to run %s: drop capabilities: %w", argv[0], err))
	}
	if p.NetFilter {
		// With the execguard filter, tandem judges listen (unix sockets
		// only): the network filter lets it through to it.
		if err := installNetFilter(p.ExecFD != 0); err != nil {
			return fail(exitRefused, fmt.Errorf("refusing to run %s: %w", argv[0], err))
		}
	}
	if p.ExecFD != 0 {
		if err := guardExecs(p.ExecFD, execguard.Filter{Execs: !p.ExecsUnjudged, Listens: p.NetFilter}); err != nil {
			return fail(exitRefused, fmt.Errorf("refusing to run %s: %w", argv[0], err))
		}
	}
	// Whatever tandem's own parent left open (a file, a socket) must not
	// reach the program: it would be a way around the policy.
	if err := closeInherited(); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to run %s: close inherited fds: %w", argv[0], err))
	}
	err = syscall.Exec(path, argv, os.Environ())
	return fail(exitNoExec, fmt.Errorf("exec %s: %w", path, err))
}

// isolateNetwork sets up the launcher's own network namespace, if it has
// one: loopback up, and the proxy's listener handed to tandem. It runs
// before Landlock (which would deny the bind) and before the capabilities
// it needs are dropped.
func isolateNetwork(p Policy) error {
	if !p.Namespace {
		return nil
	}
	if err := upLoopback(); err != nil {
		return err
	}
	// The namespace must be a fresh one: a launcher started without
	// Command's clone flags would otherwise bind the proxy's port on the
	// host's loopback and run the shell on the host's network.
	if err := onlyLoopback(); err != nil {
		return err
	}
	if p.ProxyFD != 0 {
		return handOverProxy(p.ProxyPort, p.ProxyFD)
	}
	return nil
}

// guardExecs installs the execguard filter on this (locked) thread and
// sends its listener to tandem over descriptor sock. From here on, the
// program's connects (and, with execs, the exec of the program itself)
// wait for tandem, and fail if tandem has gone.
func guardExecs(sock int, f execguard.Filter) error {
	if f.Execs {
		// Who started a program is judged by its parents: no process of
		// the tree may pick its parent or rewrite another's memory.
		if err := execguard.GuardLineage(); err != nil {
			return err
		}
	}
	listener, err := execguard.Install(f)
	if err != nil {
		return err
	}
	// The filter holds this thread's sendmsg until tandem answers, and
	// tandem answers once it has the listener that this sendmsg carries:
	// another thread sends it. The Go runtime starts no thread from this
	// locked one (it asks its template thread), so no other thread has
	// the filter.
	sent := make(chan error, 1)
	go func() { sent <- execguard.Send(sock, listener) }()
	err = <-sent
	return errors.Join(err, unix.Close(listener), unix.Close(sock))
}

// fail reports err the way a launcher does (prefixed, on stderr) and
// returns code for the caller to exit with.
func fail(code int, err error) int {
	fmt.Fprintf(os.Stderr, "tandem sandbox: %v\n", err)
	return code
}

// parseArgs splits "<policy JSON> -- argv..." as built by Command.
func parseArgs(args []string) (Policy, []string, error) {
	const usage = "usage: " + ArgName + " <policy> -- program [args...]"
	if len(args) < 3 || args[1] != "--" || args[2] == "" {
		return Policy{}, nil, errors.New(usage)
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader([]byte(args[0])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Policy{}, nil, fmt.Errorf("decode policy: %w (%s)", err, usage)
	}
	if err := p.validate(); err != nil {
		return Policy{}, nil, err
	}
	return p, args[2:], nil
}

// dropCapabilities empties every capability set of the calling thread, so
// that a launcher started as root does not hand root's powers (loading
// kernel modules, raw I/O, rebooting, bypassing file permissions) to the
// program: Landlock confines paths and ports, not those. Landlock has set
// no_new_privs already, so execve cannot grant capabilities back.
func dropCapabilities() error {
	// The bounding set can only shrink with CAP_SETPCAP; without it the
	// permitted set is what matters, and that is cleared below regardless.
	for c := 0; c < 64; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			break // past the last capability, or not allowed to shrink it
		}
		if err != nil {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	// EINVAL: kernels before 4.3 have no ambient set, so nothing to clear.
	err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// closeInherited marks every descriptor above stderr close-on-exec, so the
// program starts with stdin, stdout and stderr only. The launcher's own
// descriptors stay usable until the exec.
func closeInherited() error {
	return MarkInheritedCloseOnExec()
}

// MarkInheritedCloseOnExec sets close-on-exec on every open descriptor
// above stderr, by listing /proc/self/fd. tandem calls it first thing, so
// descriptors its parent leaked to it never reach a shell.
func MarkInheritedCloseOnExec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		// The directory's own descriptor is closed by now: EBADF is fine.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("fd %d: %w", fd, err)
		}
	}
	return nil
}
