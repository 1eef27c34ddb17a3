package local

import (
	"bytes"
	"fmt"
	"os"
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

// ShellChildren reads the command lines of the shell's children, from
// /proc/PID/task/PID/children and each child's cmdline.
func (c *conn) ShellChildren(shellPID int) ([][]string, error) {
	if st, err := readStat(shellPID); err != nil || st.sid != c.pid {
		return nil, fmt.Errorf("local shell: pid %d is not a process of this session", shellPID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", shellPID, shellPID))
	if err != nil {
		return nil, fmt.Errorf("local shell: %w", err)
	}
	var kids [][]string
	for _, f := range strings.Fields(string(b)) {
		cl, err := os.ReadFile("/proc/" + f + "/cmdline")
		if err != nil || len(cl) == 0 {
			continue // gone meanwhile
		}
		kids = append(kids, strings.Split(strings.TrimSuffix(string(cl), "\x00"), "\x00"))
	}
	return kids, nil
}
