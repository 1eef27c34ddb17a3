package local

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tandem-sh/tandem/internal/shell"
)

var (
	_ shell.LocalProcesses    = (*conn)(nil)
	_ shell.ShellProgramNamer = (*conn)(nil)
)

// LocalProcesses says that a look at the shell's process is a /proc read
// on this machine: tandem watches every running command for an exec of
// the shell.
func (c *conn) LocalProcesses() bool { return true }

// ShellProgram names the program the shell's process runs now, from
// /proc/PID/comm: after an exec, what replaced bash.
func (c *conn) ShellProgram(shellPID int) (string, error) {
	if st, err := readStat(shellPID); err != nil || st.sid != c.pid {
		return "", fmt.Errorf("local shell: pid %d is not a process of this session", shellPID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", shellPID))
	if err != nil {
		return "", fmt.Errorf("local shell: %w", err)
	}
	return string(bytes.TrimSpace(b)), nil
}

var _ shell.ChildLister = (*conn)(nil)

// ShellChildren reads the command lines of the shell and of its
// children, from /proc/PID/cmdline and /proc/PID/task/PID/children.
func (c *conn) ShellChildren(shellPID int) (self []string, kids [][]string, err error) {
	if st, err := readStat(shellPID); err != nil || st.sid != c.pid {
		return nil, nil, fmt.Errorf("local shell: pid %d is not a process of this session", shellPID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", shellPID, shellPID))
	if err != nil {
		return nil, nil, fmt.Errorf("local shell: %w", err)
	}
	self = cmdline(strconv.Itoa(shellPID))
	for _, f := range strings.Fields(string(b)) {
		if argv := cmdline(f); len(argv) > 0 { // else gone meanwhile
			kids = append(kids, argv)
		}
	}
	return self, kids, nil
}

// cmdline is the argv of process pid, nil if it cannot be read.
func cmdline(pid string) []string {
	b, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}
