package shell

import (
	"context"
	"strconv"
	"strings"
)

// ShellInputWaiter is implemented by a Conn that sees the terminal's
// processes only from the shell's side (over SSH, a script on the server
// reads its /proc): it tells, as InputWaiter does, whether the command in
// the foreground of the shell shellPID's terminal waits for keys.
type ShellInputWaiter interface {
	WaitingForInputOf(ctx context.Context, shellPID int) (bool, error)
}

// ForegroundTask is one thread of a process in the terminal's foreground
// process group, as /proc/PID/task/TID shows it: the evidence from which
// both backends decide whether the command waits for keys.
type ForegroundTask struct {
	// PID is the thread's process.
	PID int
	// State is the thread's state letter from its stat: R running, S
	// sleeping, D in uninterruptible I/O, T stopped.
	State byte
	// Syscall is the first line of its syscall file: "NR arg0 arg1 …" in
	// hex for a thread blocked in a call, "running", or "" when unreadable.
	Syscall string
}

// ForegroundProcs is what one look at the terminal's foreground process
// group found: its threads, which descriptors of each process are the
// terminal (its pts or /dev/tty), and which epoll descriptors watch one.
type ForegroundProcs struct {
	Tasks []ForegroundTask
	// TermFDs[pid][fd]: fd of pid is the terminal.
	TermFDs map[int]map[int]bool
	// EpollTerm[pid][fd]: fd of pid is an epoll set that holds the terminal.
	EpollTerm map[int]map[int]bool
	// Raw is true when the terminal is out of canonical mode (a line
	// editor, an inquirer-style prompt, a full-screen program).
	Raw bool
}

// Syscalls names the system call numbers the decision needs, for one
// architecture: they differ between x86-64 and the generic table arm64
// uses, and a remote server's may not be tandem's own.
type Syscalls struct {
	Read, Poll, Epoll map[int]bool
}

// SyscallsFor returns the table of a machine as uname -m names it
// (x86_64, aarch64) or as Go's GOARCH does (amd64, arm64); ok is false
// for another.
func SyscallsFor(machine string) (Syscalls, bool) {
	switch machine {
	case "x86_64", "amd64":
		return Syscalls{
			Read:  map[int]bool{0: true, 19: true},                       // read, readv
			Poll:  map[int]bool{7: true, 23: true, 270: true, 271: true}, // poll, select, pselect6, ppoll
			Epoll: map[int]bool{232: true, 281: true, 441: true},         // epoll_wait, epoll_pwait, epoll_pwait2
		}, true
	case "aarch64", "arm64", "riscv64", "loongarch64":
		return Syscalls{
			Read:  map[int]bool{63: true, 65: true},
			Poll:  map[int]bool{72: true, 73: true},
			Epoll: map[int]bool{22: true, 441: true},
		}, true
	}
	return Syscalls{}, false
}

// WaitsForInput decides from one look whether the foreground command waits
// for keys: no thread of it runs or waits on a disk (a command that
// computes, even after printing a prompt-like line, is not waiting), and a
// thread is blocked reading the terminal, in read(2) on a descriptor that
// is the terminal, in epoll_wait on a set that holds it (node's readline,
// inquirer, npm init), or, with the terminal out of canonical mode, in
// poll or select (whose descriptors /proc does not show: bash's readline,
// Python's input). known is false when no thread's call could be read
// (/proc/PID/syscall needs ptrace access to the process).
func WaitsForInput(p ForegroundProcs, sc Syscalls) (waiting, known bool) {
	reading := false
	for _, t := range p.Tasks {
		if t.State == 'R' || t.State == 'D' {
			return false, true
		}
		f := strings.Fields(t.Syscall)
		if len(f) == 0 {
			continue
		}
		known = true
		if len(f) < 2 {
			continue // "running", or a thread in no call
		}
		nr, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		arg0, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 64)
		if err != nil {
			continue
		}
		switch {
		case sc.Read[nr] && p.TermFDs[t.PID][int(arg0)]:
			reading = true
		case sc.Epoll[nr] && p.EpollTerm[t.PID][int(arg0)]:
			reading = true
		case sc.Poll[nr] && p.Raw:
			reading = true
		}
	}
	return reading, known
}
