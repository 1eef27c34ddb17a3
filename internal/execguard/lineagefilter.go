package execguard

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Trace (ancestry.go) places a process by the chain of its parents and
// their start times, facts the kernel sets at fork. They hold only while
// no process of the tree can make another process fork on its behalf, or
// pick its own parent. Three calls can:
//
//   - clone(CLONE_PARENT) gives the new process the caller's parent: a
//     child of the shell makes a sibling that looks like the shell's own
//     child, forked now (while a person's command runs, say);
//   - clone3 carries its flags in memory a filter cannot read, so it is
//     refused with ENOSYS, which the C library answers by trying clone;
//   - ptrace(PTRACE_ATTACH or PTRACE_SEIZE) and process_vm_writev let a
//     process of the same user rewrite the shell's memory and make the
//     shell itself fork whatever it likes. (Writing /proc/PID/mem is out of
//     reach already: the sandbox grants /proc read-only.)
//
// lineageProgram refuses those, on the native and the compat ABI, and
// allows everything else, including a tracer's own children (PTRACE_TRACEME
// and requests on a tracee: gdb starting a program works; attaching to a
// running process, as strace -p or gdb -p do, does not).

// Syscall numbers the lineage filter checks, per ABI.
type lineageABI struct {
	arch                            uint32
	clone, clone3, ptrace, vmWritev uint32
}

// lineageABIs returns the native and compat numbers for GOARCH.
func lineageABIs() (native, compat lineageABI, ok bool) {
	switch runtime.GOARCH {
	case "amd64":
		return lineageABI{auditArchX86_64, 56, 435, 101, 311}, lineageABI{auditArchI386, 120, 435, 26, 348}, true
	case "arm64":
		return lineageABI{auditArchAarch64, 220, 435, 117, 271}, lineageABI{auditArchARM, 120, 435, 26, 377}, true
	}
	return lineageABI{}, lineageABI{}, false
}

// ptrace requests that start tracing a process that is not the caller's
// child by its own request.
const (
	ptraceAttach = 16     // PTRACE_ATTACH
	ptraceSeize  = 0x4206 // PTRACE_SEIZE
)

// lineageProgram is the BPF filter described above. Other architectures
// are left to the exec filter, which kills them.
func lineageProgram(native, compat lineageABI) []unix.SockFilter {
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	abiInsns := func(label string, a lineageABI) []insn {
		return []insn{
			{label: label, code: ld, k: offNr},
			{code: jeq, k: a.clone, jt: "clone"},
			{code: jeq, k: a.clone3, jt: "enosys"},
			{code: jeq, k: a.ptrace, jt: "ptrace"},
			{code: jeq, k: a.vmWritev, jt: "eperm"},
			{code: ret, k: unix.SECCOMP_RET_ALLOW},
		}
	}
	prog := []insn{
		{code: ld, k: offArch},
		{code: jeq, k: native.arch, jt: "native"},
		{code: jeq, k: compat.arch, jt: "compat"},
		{code: ret, k: unix.SECCOMP_RET_ALLOW},
	}
	prog = append(prog, abiInsns("native", native)...)
	prog = append(prog, abiInsns("compat", compat)...)
	prog = append(prog,
		// clone's flags are its first argument on both ABIs (the low
		// word holds CLONE_PARENT).
		insn{label: "clone", code: ld, k: offArg0},
		insn{code: jset, k: unix.CLONE_PARENT, jt: "eperm"},
		insn{code: ret, k: unix.SECCOMP_RET_ALLOW},
		insn{label: "ptrace", code: ld, k: offArg0},
		insn{code: jeq, k: ptraceAttach, jt: "eperm"},
		insn{code: jeq, k: ptraceSeize, jt: "eperm"},
		insn{code: ret, k: unix.SECCOMP_RET_ALLOW},
		insn{label: "enosys", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		insn{label: "eperm", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	)
	return assemble(prog)
}

// GuardLineage puts the calling thread under the lineage filter, so that
// no process of the tree it starts can fork as another's child or rewrite
// another's memory: what Trace reads stays true. Like Install, it applies
// to the calling thread only (lock it, and exec from it), and it sets
// no_new_privs. The sandbox launcher calls it where execs are judged.
func GuardLineage() error {
	native, compat, ok := lineageABIs()
	if !ok {
		return fmt.Errorf("%w: not built for %s", ErrUnavailable, runtime.GOARCH)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("lineage filter: prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	prog := lineageProgram(native, compat)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("lineage filter: seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}
