package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The network filter is the fallback for hosts where a session cannot
// have a network namespace of its own (a container that forbids them): a
// plain seccomp filter, with no listener (a process may have only one, and
// exec judging holds it), that makes the calls Landlock's TCP rules do not
// see fail with EPERM. Landlock then checks what is left: connect and bind
// of TCP sockets.
//
//	socket(AF_INET or AF_INET6, t, proto): only t = SOCK_STREAM (flags
//	    masked) with proto 0 or IPPROTO_TCP; UDP, raw, MPTCP, SCTP, SMC refused
//	socket(other family): AF_UNIX, AF_NETLINK and AF_ALG only (AF_PACKET,
//	    AF_VSOCK, AF_SMC, AF_TIPC, ... refused)
//	listen: refused (listen autobinds an unbound TCP socket to a port,
//	    which Landlock's bind rule never sees; the filter cannot tell a UNIX
//	    socket's descriptor from a TCP one's), unless the execguard filter
//	    is installed too: it sends listen to tandem, which listens on a
//	    duplicate of a UNIX socket and refuses any other (EPERM)
//	sendto, sendmsg, sendmmsg with MSG_FASTOPEN: refused (a connect
//	    without connect(2))
//	setsockopt(IPPROTO_TCP, TCP_FASTOPEN_CONNECT or TCP_ULP): refused
//	io_uring_setup, _enter, _register: refused (a ring connects, sends and
//	    makes sockets without these syscalls)
//	socketcall (i386): refused (its arguments are behind a pointer)
//	x32 syscalls: ENOSYS; an unknown architecture: the process is killed
//
// The compat ABI (i386 on amd64, arm on arm64) gets the same argument
// checks with its own syscall numbers.

// netABI is one architecture's syscall numbers, as the network filter sees
// them. A zero number is one the ABI does not have.
type netABI struct {
	arch                                        uint32
	socket, listen, sendto, sendmsg, sendmmsg   uint32
	setsockopt, socketcall                      uint32
	ioUringSetup, ioUringEnter, ioUringRegister uint32
}

// netArchs is what the network filter knows for the architecture tandem
// was built for.
type netArchs struct {
	native, compat netABI
	x32            bool
}

// Audit architecture numbers (linux/audit.h).
const (
	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAarch64 = 0xc00000b7
	auditArchARM     = 0x40000028
	x32SyscallBit    = 0x40000000
)

// netFilterArchs returns the filter's architectures for GOARCH, or false
// where the fallback is not built (a session there is refused rather than
// run with only Landlock's TCP rules).
func netFilterArchs() (netArchs, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return netArchs{
			native: netABI{arch: auditArchX86_64, socket: 41, listen: 50, sendto: 44, sendmsg: 46, sendmmsg: 307,
				setsockopt: 54, ioUringSetup: 425, ioUringEnter: 426, ioUringRegister: 427},
			compat: netABI{arch: auditArchI386, socket: 359, listen: 363, sendto: 369, sendmsg: 370, sendmmsg: 345,
				setsockopt: 366, socketcall: 102, ioUringSetup: 425, ioUringEnter: 426, ioUringRegister: 427},
			x32: true,
		}, true
	case "arm64":
		return netArchs{
			native: netABI{arch: auditArchAarch64, socket: 198, listen: 201, sendto: 206, sendmsg: 211, sendmmsg: 269,
				setsockopt: 208, ioUringSetup: 425, ioUringEnter: 426, ioUringRegister: 427},
			compat: netABI{arch: auditArchARM, socket: 281, listen: 284, sendto: 290, sendmsg: 296, sendmmsg: 374,
				setsockopt: 294, socketcall: 102, ioUringSetup: 425, ioUringEnter: 426, ioUringRegister: 427},
		}, true
	}
	return netArchs{}, false
}

// Offsets in struct seccomp_data (little-endian: an argument's low 32 bits
// come first, and the kernel reads these arguments as int).
const (
	offNr   = 0
	offArch = 4
)

func offArg(i uint32) uint32 { return 16 + 8*i }

// insn is one BPF instruction whose jumps name labels, not offsets.
type insn struct {
	code   uint16
	k      uint32
	jt, jf string
	label  string
}

// assemble resolves labels into the relative forward jumps BPF wants.
func assemble(prog []insn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		var jumps [2]uint8
		for j, l := range []string{in.jt, in.jf} {
			if l == "" {
				continue
			}
			t, ok := at[l]
			if !ok || t <= i || t-i-1 > 255 {
				return nil, fmt.Errorf("network filter: bad jump to %q at %d", l, i)
			}
			jumps[j] = uint8(t - i - 1)
		}
		out[i] = unix.SockFilter{Code: in.code, K: in.k, Jt: jumps[0], Jf: jumps[1]}
	}
	return out, nil
}

// BPF opcodes the filter uses.
const (
	bpfLd   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfAnd  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	bpfRet  = unix.BPF_RET | unix.BPF_K

	retAllow = unix.SECCOMP_RET_ALLOW
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
)

// netProgram is the filter's BPF program (see the comment at the top).
func netProgram(a netArchs, listenJudged bool) ([]unix.SockFilter, error) {
	x32 := uint32(0) // a mask that never matches when there is no x32 ABI
	if a.x32 {
		x32 = x32SyscallBit
	}
	prog := []insn{
		{code: bpfLd, k: offArch},
		{code: bpfJeq, k: a.native.arch, jt: "native"},
		{code: bpfJeq, k: a.compat.arch, jt: "compat"},
		{code: bpfRet, k: unix.SECCOMP_RET_KILL_PROCESS},
		{label: "native", code: bpfLd, k: offNr},
		{code: bpfJset, k: x32, jt: "enosys"},
	}
	native, compat := a.native, a.compat
	if listenJudged {
		native.listen, compat.listen = 0, 0
	}
	prog = append(prog, dispatch(native, "n_")...)
	prog = append(prog, insn{label: "compat", code: bpfLd, k: offNr})
	prog = append(prog, dispatch(compat, "c_")...)
	prog = append(prog, argChecks("n_")...)
	prog = append(prog, argChecks("c_")...)
	prog = append(prog,
		insn{label: "allow", code: bpfRet, k: retAllow},
		insn{label: "eperm", code: bpfRet, k: retEPERM},
		insn{label: "enosys", code: bpfRet, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
	)
	return assemble(prog)
}

// dispatch jumps on the syscall number (in the accumulator) to the checks
// of one ABI, whose labels start with p; any other call is allowed.
func dispatch(n netABI, p string) []insn {
	var out []insn
	add := func(nr uint32, to string) {
		if nr != 0 {
			out = append(out, insn{code: bpfJeq, k: nr, jt: to})
		}
	}
	add(n.socket, p+"socket")
	add(n.sendto, p+"flags3")
	add(n.sendmmsg, p+"flags3")
	add(n.sendmsg, p+"flags2")
	add(n.setsockopt, p+"sockopt")
	for _, nr := range []uint32{n.listen, n.socketcall, n.ioUringSetup, n.ioUringEnter, n.ioUringRegister} {
		add(nr, "eperm")
	}
	return append(out, insn{code: bpfRet, k: retAllow})
}

// argChecks are the argument checks of one ABI (labels start with p).
func argChecks(p string) []insn {
	return []insn{
		// socket(domain, type, protocol)
		{label: p + "socket", code: bpfLd, k: offArg(0)},
		{code: bpfJeq, k: unix.AF_INET, jt: p + "inet"},
		{code: bpfJeq, k: unix.AF_INET6, jt: p + "inet"},
		{code: bpfJeq, k: unix.AF_UNIX, jt: "allow"},
		{code: bpfJeq, k: unix.AF_NETLINK, jt: "allow"},
		{code: bpfJeq, k: unix.AF_ALG, jt: "allow", jf: "eperm"},
		{label: p + "inet", code: bpfLd, k: offArg(1)},
		{code: bpfAnd, k: ^uint32(unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC)},
		{code: bpfJeq, k: unix.SOCK_STREAM, jf: "eperm"},
		{code: bpfLd, k: offArg(2)},
		{code: bpfJeq, k: 0, jt: "allow"},
		{code: bpfJeq, k: unix.IPPROTO_TCP, jt: "allow", jf: "eperm"},

		// sendto(fd, buf, len, flags, ...), sendmmsg(fd, vec, n, flags)
		{label: p + "flags3", code: bpfLd, k: offArg(3)},
		{code: bpfJset, k: unix.MSG_FASTOPEN, jt: "eperm", jf: "allow"},
		// sendmsg(fd, msg, flags)
		{label: p + "flags2", code: bpfLd, k: offArg(2)},
		{code: bpfJset, k: unix.MSG_FASTOPEN, jt: "eperm", jf: "allow"},

		// setsockopt(fd, level, name, ...)
		{label: p + "sockopt", code: bpfLd, k: offArg(1)},
		{code: bpfJeq, k: unix.IPPROTO_TCP, jf: "allow"},
		{code: bpfLd, k: offArg(2)},
		{code: bpfJeq, k: unix.TCP_FASTOPEN_CONNECT, jt: "eperm"},
		{code: bpfJeq, k: unix.TCP_ULP, jt: "eperm", jf: "allow"},
	}
}

// installNetFilter puts the calling thread under the network filter; with
// listenJudged it lets listen through to the execguard filter, whose
// tandem lets unix sockets listen and refuses any other. Like
// the exec filter it has no TSYNC: the caller locks its goroutine to the
// thread and execs from it, so the program starts with the filter on its
// only thread and every descendant inherits it. no_new_privs must be set
// (Landlock has set it in the launcher; it is set here too).
func installNetFilter(listenJudged bool) error {
	a, ok := netFilterArchs()
	if !ok {
		return fmt.Errorf("%w: the network filter is not built for %s", ErrUnsupported, runtime.GOARCH)
	}
	prog, err := netProgram(a, listenJudged)
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("network filter: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("network filter: seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}
