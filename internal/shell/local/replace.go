package local

import (
	"bytes"
	"fmt"
	"os"

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
