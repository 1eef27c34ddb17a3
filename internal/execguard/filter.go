package execguard

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by every error that says the running kernel
// cannot judge execs (no seccomp user notification, or one too old to let
// an allowed exec continue).
var ErrUnavailable = errors.New("kernel cannot judge execs")

// Audit architecture numbers (linux/audit.h) the filter tells apart.
const (
	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAarch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	x32SyscallBit    = 0x40000000
)

// abi is one architecture's syscalls, as the filter sees them. A zero
// number is one the ABI does not have.
type abi struct {
	arch                               uint32
	execve, execveat                   uint32
	seccomp                            uint32
	connect, sendto, sendmsg, sendmmsg uint32
	listen                             uint32
	socketcall                         uint32 // i386 only
}

// The io_uring syscalls, the same on every architecture the filter knows.
const (
	ioUringSetup    = 425
	ioUringEnter    = 426
	ioUringRegister = 427
)

// archs is what the filter knows for the architecture tandem was built for:
// the native ABI, whose execs are judged, and the compat ABI, whose execs
// are refused (tandem reads argv as native pointers). Any other arch is
// killed.
type archs struct {
	native, compat abi
	x32            bool // native syscall numbers with x32SyscallBit set are x32's: refused
}

// hostArchs returns the filter's architectures for GOARCH, or false where
// exec judging is not built.
func hostArchs() (archs, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return archs{
			native: abi{arch: auditArchX86_64, execve: 59, execveat: 322, seccomp: 317,
				connect: 42, sendto: 44, sendmsg: 46, sendmmsg: 307, listen: 50},
			compat: abi{arch: auditArchI386, execve: 11, execveat: 358, seccomp: 354,
				connect: 362, sendto: 369, sendmsg: 370, sendmmsg: 345, listen: 363, socketcall: 102},
			x32: true}, true
	case "arm64":
		return archs{
			native: abi{arch: auditArchAarch64, execve: 221, execveat: 281, seccomp: 277,
				connect: 203, sendto: 206, sendmsg: 211, sendmmsg: 269, listen: 201},
			compat: abi{arch: auditArchARM, execve: 11, execveat: 387, seccomp: 383,
				connect: 283, sendto: 290, sendmsg: 296, sendmmsg: 374, listen: 284}}, true
	}
	return archs{}, false
}

// Offsets in struct seccomp_data (little-endian: an argument's low 32 bits
// come first).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg4 = 48
)

// insn is one BPF instruction whose jumps name labels, not offsets.
type insn struct {
	code   uint16
	k      uint32
	jt, jf string // labels; "" is the next instruction
	label  string // this instruction's label
}

// assemble resolves labels into the relative jumps BPF wants.
func assemble(prog []insn) []unix.SockFilter {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	off := func(i int, l string) uint8 {
		if l == "" {
			return 0
		}
		t, ok := at[l]
		if !ok || t <= i || t-i-1 > 255 {
			panic("execguard: bad jump to " + l)
		}
		return uint8(t - i - 1)
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: off(i, in.jt), Jf: off(i, in.jf)}
	}
	return out
}

// program is the BPF filter. With execs (exec judging on):
//
//	arch native: x32 syscall → ENOSYS; execve, execveat → notify tandem;
//	             connect, sendmsg, sendmmsg, and sendto with an address →
//	             notify tandem (sockets.go);
//	             io_uring_setup, _enter, _register → EPERM;
//	             seccomp(SET_MODE_FILTER) with NEW_LISTENER → EPERM; else allow
//	arch compat: execve, execveat → EPERM; connect, sendto, sendmsg,
//	             sendmmsg, socketcall, io_uring → EPERM;
//	             seccomp with NEW_LISTENER → EPERM; else allow
//	other arch:  kill the process
//
// Without execs, execve and execveat are allowed on both ABIs; the rest is
// the same: every sandboxed session has its unix-socket connects judged.
// With listens (the network fallback, whose own filter cannot tell a unix
// socket's listen from a TCP one's), listen is sent to tandem too, which
// lets a unix socket listen and refuses any other (compat: EPERM).
// A ring's IORING_OP_CONNECT and IORING_OP_SENDMSG would connect without
// a connect(2) that the filter sees, so there is no io_uring. tandem reads
// the compat ABI's pointers as native ones, so its connects are refused.
//
// A nested filter with a listener of its own would take the notifications
// first (the newest filter's listener gets a notification that several
// filters raise) and could let them continue unjudged, so no process of
// the tree may install one.
func program(a archs, f Filter) []unix.SockFilter {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	x32 := uint32(0) // a mask that never matches when there is no x32 ABI
	if a.x32 {
		x32 = x32SyscallBit
	}
	nativeExec, compatExec := "notify", "eperm"
	if !f.Execs {
		nativeExec, compatExec = "allow", "allow"
	}
	nativeListen, compatListen := "allow", "allow"
	if f.Listens {
		nativeListen, compatListen = "notify", "eperm"
	}
	prog := []insn{
		{code: ld, k: offArch},
		{code: jeq, k: a.native.arch, jt: "native"},
		{code: jeq, k: a.compat.arch, jt: "compat"},
		{code: ret, k: unix.SECCOMP_RET_KILL_PROCESS},

		{label: "native", code: ld, k: offNr},
		{code: jset, k: x32, jt: "enosys"},
		{code: jeq, k: a.native.execve, jt: nativeExec},
		{code: jeq, k: a.native.execveat, jt: nativeExec},
		{code: jeq, k: a.native.connect, jt: "notify"},
		{code: jeq, k: a.native.sendto, jt: "sendto"},
		{code: jeq, k: a.native.sendmsg, jt: "notify"},
		{code: jeq, k: a.native.sendmmsg, jt: "notify"},
		{code: jeq, k: a.native.listen, jt: nativeListen},
		{code: jeq, k: ioUringSetup, jt: "eperm"},
		{code: jeq, k: ioUringEnter, jt: "eperm"},
		{code: jeq, k: ioUringRegister, jt: "eperm"},
		{code: jeq, k: a.native.seccomp, jt: "seccomp"},
		{code: ret, k: unix.SECCOMP_RET_ALLOW},

		{label: "compat", code: ld, k: offNr},
		{code: jeq, k: a.compat.execve, jt: compatExec},
		{code: jeq, k: a.compat.execveat, jt: compatExec},
		{code: jeq, k: a.compat.connect, jt: "eperm"},
		{code: jeq, k: a.compat.sendto, jt: "eperm"},
		{code: jeq, k: a.compat.sendmsg, jt: "eperm"},
		{code: jeq, k: a.compat.sendmmsg, jt: "eperm"},
		{code: jeq, k: a.compat.listen, jt: compatListen},
		{code: jeq, k: ioUringSetup, jt: "eperm"},
		{code: jeq, k: ioUringEnter, jt: "eperm"},
		{code: jeq, k: ioUringRegister, jt: "eperm"},
	}
	if a.compat.socketcall != 0 {
		prog = append(prog, insn{code: jeq, k: a.compat.socketcall, jt: "eperm"})
	}
	return assemble(append(prog,
		insn{code: jeq, k: a.compat.seccomp, jt: "seccomp"},
		insn{code: ret, k: unix.SECCOMP_RET_ALLOW},

		// sendto's address pointer is a register, not memory: a send
		// without one (send(2), a connected socket) never waits on tandem.
		insn{label: "sendto", code: ld, k: offArg4},
		insn{code: jeq, k: 0, jf: "notify"},
		insn{code: ld, k: offArg4 + 4},
		insn{code: jeq, k: 0, jt: "allow", jf: "notify"},

		insn{label: "seccomp", code: ld, k: offArg0},
		insn{code: jeq, k: unix.SECCOMP_SET_MODE_FILTER, jf: "allow"},
		insn{code: ld, k: offArg1},
		insn{code: jset, k: unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, jt: "eperm"},
		insn{label: "allow", code: ret, k: unix.SECCOMP_RET_ALLOW},
		insn{label: "notify", code: ret, k: unix.SECCOMP_RET_USER_NOTIF},
		insn{label: "enosys", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		insn{label: "eperm", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	))
}

// Filter says what the filter sends to tandem besides connects and sends
// to an address, which it always sends.
type Filter struct {
	// Execs: every exec waits for tandem's verdict.
	Execs bool
	// Listens: every listen waits for tandem, which lets only unix sockets
	// listen (for the network fallback, which refuses listen itself
	// otherwise).
	Listens bool
}

// Install puts the calling thread under the filter f and returns the
// filter's listener descriptor (close-on-exec). Connects and sends to an
// address always wait for tandem (sockets.go). It sets no_new_privs, which
// an unprivileged filter needs (Landlock has set it already in the
// launcher).
//
// The filter applies to the calling thread only, not to the process's
// other threads (no TSYNC): the caller must lock its goroutine to the
// thread (runtime.LockOSThread) and exec from that same thread, as the
// sandbox launcher does. execve ends every other thread, so the program
// starts with the filter on its only thread and every descendant inherits
// it; the Go runtime's other threads never exec.
func Install(f Filter) (int, error) {
	a, ok := hostArchs()
	if !ok {
		return -1, fmt.Errorf("%w: not built for %s", ErrUnavailable, runtime.GOARCH)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("exec filter: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	prog := program(a, f)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	// WAIT_KILLABLE_RECV (5.19): once tandem has taken a notification, only
	// a fatal signal ends the wait. Without it a signal (Go's preemption,
	// SIGCHLD) abandons the notification and restarts the syscall, after
	// tandem may have connected the socket on the process's behalf.
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, uintptr(unsafe.Pointer(&fprog)))
	if errno == unix.EINVAL {
		fd, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	}
	runtime.KeepAlive(prog)
	if errno != 0 {
		return -1, fmt.Errorf("exec filter: seccomp(SET_MODE_FILTER, NEW_LISTENER): %w", errno)
	}
	return int(fd), nil
}

// minKernel is the first Linux release whose user notification can let a
// syscall continue (SECCOMP_USER_NOTIF_FLAG_CONTINUE, 5.5).
var minKernel = [2]int{5, 5}

// Available reports whether the running kernel can judge execs. The error
// wraps ErrUnavailable and says what is missing.
func Available() error {
	if _, ok := hostArchs(); !ok {
		return fmt.Errorf("%w: exec judging is not built for %s", ErrUnavailable, runtime.GOARCH)
	}
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		return fmt.Errorf("%w: seccomp filters are not available (%v)", ErrUnavailable, err)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("%w: uname: %v", ErrUnavailable, err)
	}
	return available(string(b), unix.ByteSliceToString(u.Release[:]))
}

// available is Available's verdict on the kernel's seccomp actions and
// release string.
func available(actions, rel string) error {
	actions = strings.TrimSpace(actions)
	if !strings.Contains(" "+actions+" ", " user_notif ") {
		return fmt.Errorf("%w: seccomp user notification is not available (actions: %s)", ErrUnavailable, actions)
	}
	if v, ok := release(rel); !ok || v[0] < minKernel[0] || (v[0] == minKernel[0] && v[1] < minKernel[1]) {
		return fmt.Errorf("%w: Linux %s cannot let an allowed exec continue (Linux %d.%d+ is needed)", ErrUnavailable, rel, minKernel[0], minKernel[1])
	}
	return nil
}

// release parses the major and minor numbers of a kernel release string
// such as "6.18.44-fc".
func release(s string) ([2]int, bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	mn, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return [2]int{}, false
	}
	return [2]int{major, mn}, true
}
