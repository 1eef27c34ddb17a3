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

// abi is one architecture's exec syscalls, as the filter sees them.
type abi struct {
	arch             uint32
	execve, execveat uint32
}

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
		return archs{native: abi{auditArchX86_64, 59, 322}, compat: abi{auditArchI386, 11, 358}, x32: true}, true
	case "arm64":
		return archs{native: abi{auditArchAarch64, 221, 281}, compat: abi{auditArchARM, 11, 387}}, true
	}
	return archs{}, false
}

// Offsets in struct seccomp_data.
const (
	offNr   = 0
	offArch = 4
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// program is the BPF filter, written out by hand:
//
//	load arch
//	arch == native?  no → compat?  no → kill process
//	native: load nr; x32 bit set → errno ENOSYS; execve or execveat → notify; else allow
//	compat: load nr; execve or execveat → errno EPERM; else allow
func program(a archs) []unix.SockFilter {
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
	return []unix.SockFilter{
		/* 0 */ stmt(ld, offArch),
		/* 1 */ jump(jeq, a.native.arch, 2, 0), // → 4
		/* 2 */ jump(jeq, a.compat.arch, 8, 0), // → 11
		/* 3 */ stmt(ret, unix.SECCOMP_RET_KILL_PROCESS),
		/* 4 */ stmt(ld, offNr),
		/* 5 */ jump(jset, x32, 4, 0), // → 10
		/* 6 */ jump(jeq, a.native.execve, 2, 0), // → 9
		/* 7 */ jump(jeq, a.native.execveat, 1, 0), // → 9
		/* 8 */ stmt(ret, unix.SECCOMP_RET_ALLOW),
		/* 9 */ stmt(ret, unix.SECCOMP_RET_USER_NOTIF),
		/* 10 */ stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)),
		/* 11 */ stmt(ld, offNr),
		/* 12 */ jump(jeq, a.compat.execve, 2, 0), // → 15
		/* 13 */ jump(jeq, a.compat.execveat, 1, 0), // → 15
		/* 14 */ stmt(ret, unix.SECCOMP_RET_ALLOW),
		/* 15 */ stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
	}
}

// Install puts the calling thread under the exec filter and returns the
// filter's listener descriptor (close-on-exec). It sets no_new_privs, which
// an unprivileged filter needs (Landlock has set it already in the
// launcher).
//
// The filter applies to the calling thread only, not to the process's
// other threads (no TSYNC): the caller must lock its goroutine to the
// thread (runtime.LockOSThread) and exec from that same thread, as the
// sandbox launcher does. execve ends every other thread, so the program
// starts with the filter on its only thread and every descendant inherits
// it; the Go runtime's other threads never exec.
func Install() (int, error) {
	a, ok := hostArchs()
	if !ok {
		return -1, fmt.Errorf("%w: not built for %s", ErrUnavailable, runtime.GOARCH)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("exec filter: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	prog := program(a)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
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
	if !strings.Contains(" "+strings.TrimSpace(string(b))+" ", " user_notif ") {
		return fmt.Errorf("%w: seccomp user notification is not available (actions: %s)", ErrUnavailable, strings.TrimSpace(string(b)))
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("%w: uname: %v", ErrUnavailable, err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
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
