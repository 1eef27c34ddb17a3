package sshconn

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

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

var _ shell.ChildLister = (*conn)(nil)

// ShellChildren reads the command lines of the shell and of its
// children on the server, on one exec channel: /proc/PID/cmdline, then
// each child's from /proc/PID/task/PID/children, an RS byte after each.
func (c *conn) ShellChildren(shellPID int) (self []string, kids [][]string, err error) {
	if shellPID <= 0 {
		return nil, nil, fmt.Errorf("sshconn: invalid pid %d", shellPID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	p := strconv.Itoa(shellPID)
	b, err := c.exec(ctx, "for c in "+p+" $(cat /proc/"+p+"/task/"+p+"/children); do cat /proc/$c/cmdline 2>/dev/null; printf '\\036'; done")
	if err != nil {
		return nil, nil, fmt.Errorf("sshconn: shell %d: %w", shellPID, err)
	}
	for i, cl := range strings.Split(string(b), "\x1e") {
		var argv []string
		if cl = strings.TrimSuffix(cl, "\x00"); cl != "" {
			argv = strings.Split(cl, "\x00")
		}
		switch {
		case i == 0:
			self = argv
		case argv != nil:
			kids = append(kids, argv)
		}
	}
	return self, kids, nil
}
