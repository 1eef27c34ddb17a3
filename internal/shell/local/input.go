package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

var _ shell.InputWaiter = (*conn)(nil)

// WaitingForInput reports whether the command in the terminal's
// foreground process group waits for keys from the session's terminal
// (see shell.WaitsForInput for the evidence that counts): every thread of
// the group, with the descriptors of each process that are the terminal
// (its pts, or /dev/tty as getpass and `read < /dev/tty` open it) and the
// epoll sets that watch one. It reads /proc, which tandem may for its own
// descendants; a process it cannot inspect counts as not waiting.
func (c *conn) WaitingForInput() (bool, error) {
	var pgrp, ptn int
	var lflag uint32
	err := c.control(func(fd int) (err error) {
		if pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil {
			return err
		}
		if ptn, err = unix.IoctlGetInt(fd, unix.TIOCGPTN); err != nil {
			return err
		}
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err == nil {
			lflag = t.Lflag
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("local shell: terminal: %w", err)
	}
	sc, ok := shell.SyscallsFor(runtime.GOARCH)
	if !ok {
		return false, fmt.Errorf("local shell: no system call table for %s", runtime.GOARCH)
	}
	p := foreground(pgrp, fmt.Sprintf("/dev/pts/%d", ptn))
	p.Raw = lflag&unix.ICANON == 0
	w, known := shell.WaitsForInput(p, sc)
	if !known {
		return false, fmt.Errorf("local shell: the system calls of process group %d are unreadable", pgrp)
	}
	return w, nil
}

// foreground gathers what shell.WaitsForInput needs about the processes of
// process group pgrp, whose terminal is tty.
func foreground(pgrp int, tty string) shell.ForegroundProcs {
	p := shell.ForegroundProcs{TermFDs: map[int]map[int]bool{}, EpollTerm: map[int]map[int]bool{}}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || processGroup(pid) != pgrp {
			continue
		}
		term := map[int]bool{}
		fds, _ := os.ReadDir(dir + "/fd")
		for _, e := range fds {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// /dev/tty is the process's controlling terminal: this one,
			// as the process is in its foreground group.
			if target, err := os.Readlink(dir + "/fd/" + e.Name()); err == nil && (target == tty || target == "/dev/tty") {
				term[fd] = true
			}
		}
		p.TermFDs[pid] = term
		p.EpollTerm[pid] = epollsWatching(dir, fds, term)
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			td := dir + "/task/" + t.Name()
			sc, _ := os.ReadFile(td + "/syscall")
			line, _, _ := strings.Cut(string(sc), "\n")
			p.Tasks = append(p.Tasks, shell.ForegroundTask{PID: pid, State: taskState(td), Syscall: line})
		}
	}
	return p
}

// epollsWatching lists the epoll descriptors of a process (dir is its
// /proc directory) whose set holds one of the terminal's descriptors, from
// their fdinfo's "tfd:" lines.
func epollsWatching(dir string, fds []os.DirEntry, term map[int]bool) map[int]bool {
	out := map[int]bool{}
	if len(term) == 0 {
		return out
	}
	for _, e := range fds {
		if target, err := os.Readlink(dir + "/fd/" + e.Name()); err != nil || target != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile(dir + "/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(info), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || f[0] != "tfd:" {
				continue
			}
			if tfd, err := strconv.Atoi(f[1]); err == nil && term[tfd] {
				fd, _ := strconv.Atoi(e.Name())
				out[fd] = true
				break
			}
		}
	}
	return out
}

// taskState is the state letter of a thread (field 3 of its stat), or 0.
func taskState(dir string) byte {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

var _ shell.ProgramNamer = (*conn)(nil)

// ForegroundProgram names the program that leads the terminal's
// foreground process group, from /proc/PID/comm.
func (c *conn) ForegroundProgram() (string, error) {
	var pgrp int
	if err := c.control(func(fd int) (err error) {
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	}); err != nil {
		return "", fmt.Errorf("local shell: TIOCGPGRP: %w", err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pgrp))
	if err != nil {
		return "", fmt.Errorf("local shell: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// processGroup is field 5 of /proc/PID/stat, or -1.
func processGroup(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) is in parentheses and may hold anything.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}

var (
	_ shell.InputFlusher      = (*conn)(nil)
	_ shell.InputQueuer       = (*conn)(nil)
	_ shell.SignalKeyReporter = (*conn)(nil)
)

// peer opens the terminal's slave side through the master (TIOCGPTPEER),
// without a path or a controlling terminal, for f; it is closed after, so
// the shell's exit still ends the terminal.
func (c *conn) peer(f func(fd int) error) error {
	var pfd int
	err := c.control(func(fd int) error {
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
		if errno != 0 {
			return errno
		}
		pfd = int(r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("local shell: TIOCGPTPEER: %w", err)
	}
	defer unix.Close(pfd)
	return f(pfd)
}

// FlushInput discards what the terminal's input queue holds unread, the
// kernel's pending buffers included (TCIFLUSH on the slave side).
func (c *conn) FlushInput() error {
	return c.peer(func(fd int) error {
		if err := unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH); err != nil {
			return fmt.Errorf("local shell: TCFLSH: %w", err)
		}
		return nil
	})
}

// InputQueue reports how many bytes a read of the terminal could take now
// (TIOCINQ on the slave side) and whether it is in canonical mode, where a
// line still being typed is not counted. Bytes written to the master reach
// the line discipline on a kernel worker, later: a poll of the slave side
// first waits for that worker when no input shows yet (n_tty_poll), so
// TIOCINQ counts every byte written before the call.
func (c *conn) InputQueue() (n int, canonical bool, err error) {
	err = c.peer(func(fd int) error {
		if _, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0); err != nil && err != unix.EINTR {
			return fmt.Errorf("local shell: poll: %w", err)
		}
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return fmt.Errorf("local shell: TCGETS: %w", err)
		}
		canonical = t.Lflag&unix.ICANON != 0
		if n, err = unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil {
			return fmt.Errorf("local shell: TIOCINQ: %w", err)
		}
		return nil
	})
	return n, canonical, err
}

// SignalKeys are the keys the terminal turns into signals now (VINTR,
// VQUIT, VSUSP), none when ISIG is off.
func (c *conn) SignalKeys() ([]byte, error) {
	var t *unix.Termios
	err := c.control(func(fd int) (err error) {
		t, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("local shell: TCGETS: %w", err)
	}
	if t.Lflag&unix.ISIG == 0 {
		return nil, nil
	}
	var keys []byte
	for _, i := range []int{unix.VINTR, unix.VQUIT, unix.VSUSP} {
		if k := t.Cc[i]; k != 0 { // 0 is _POSIX_VDISABLE
			keys = append(keys, k)
		}
	}
	return keys, nil
}
