package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

var _ shell.InputWaiter = (*conn)(nil)

// WaitingForInput reports whether a process of the terminal's foreground
// process group waits for keys from the session's terminal: blocked in
// read(2) on it, whatever fd it holds it as (getpass and `read <
// /dev/tty` open /dev/tty), or, with the terminal out of canonical mode
// (a line editor, a REPL, a full-screen program), blocked in poll or
// select. It reads /proc, which tandem may for its own descendants; a
// process it cannot inspect counts as not waiting.
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
	tty := fmt.Sprintf("/dev/pts/%d", ptn)
	raw := lflag&unix.ICANON == 0
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return false, err
	}
	for _, dir := range pids {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || processGroup(pid) != pgrp {
			continue
		}
		nr, fd, ok := blockedIn(pid)
		switch {
		case !ok:
		case nr == unix.SYS_READ || nr == unix.SYS_READV:
			// /dev/tty is the process's controlling terminal: this one,
			// as the process is in its foreground group.
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err == nil && (target == tty || target == "/dev/tty") {
				return true, nil
			}
		case raw && pollCalls[nr]:
			return true, nil
		}
	}
	return false, nil
}

// pollCalls are the syscalls a line editor or full-screen program waits
// for keys in.
var pollCalls = map[int]bool{
	unix.SYS_POLL: true, unix.SYS_PPOLL: true, unix.SYS_SELECT: true, unix.SYS_PSELECT6: true,
	unix.SYS_EPOLL_WAIT: true, unix.SYS_EPOLL_PWAIT: true,
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

// blockedIn reports the syscall a process is blocked in and its first
// argument, from /proc/PID/syscall ("NR arg0 …", hex arguments); ok is
// false for a running process.
func blockedIn(pid int) (nr, arg0 int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	nr, err = strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, false
	}
	a, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return nr, int(a), true
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
