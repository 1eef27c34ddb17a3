package sshconn

import (
	"bytes"

	"github.com/tandem-sh/tandem/internal/shell"
)

var _ shell.ShellProgramNamer = (*conn)(nil)

// ShellProgram names the program the shell's process runs now, from
// /proc/PID/comm on the server, on its own exec channel: after an exec,
// what replaced bash.
func (c *conn) ShellProgram(shellPID int) (string, error) {
	b, err := c.procFile(shellPID, "comm")
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(b)), nil
}
