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
// process group is blocked in read(2) on the session's terminal: a prompt
// nobody will answer for the agent (a password, a y/n question, an
// interactive program). It reads /proc, which tandem may for its own
// descendants; a process it cannot inspect counts as not waiting.
func (c *conn) WaitingForInput() (bool, error) {
	var pgrp, ptn int
	err := c.control(func(fd int) (err error) {
		if pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP); err != nil {
			return err
		}
		ptn, err = unix.IoctlGetInt(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("local shell: terminal: %w", err)
	}
	tty := fmt.Sprintf("/dev/pts/%d", ptn)
	pids, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return false, err
	}
	for _, dir := range pids {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil || processGroup(pid) != pgrp {
			continue
		}
		if fd, ok := readingFD(pid); ok {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err == nil && target == tty {
				return true, nil
			}
		}
	}
	return false, nil
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

// readingFD reports the fd a process is blocked reading, from
// /proc/PID/syscall ("NR arg0 …", hex arguments).
func readingFD(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil || (nr != unix.SYS_READ && nr != unix.SYS_READV) {
		return 0, false
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 32)
	if err != nil {
		return 0, false
	}
	return int(fd), true
}
