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

// ShellChildren reads the command lines of the shell's children on the
// server, on one exec channel: /proc/PID/task/PID/children and each
// child's cmdline, an RS byte after each.
func (c *conn) ShellChildren(shellPID int) ([][]string, error) {
	if shellPID <= 0 {
		return nil, fmt.Errorf("sshconn: invalid pid %d", shellPID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	p := strconv.Itoa(shellPID)
	b, err := c.exec(ctx, "for c in $(cat /proc/"+p+"/task/"+p+"/children); do cat /proc/$c/cmdline 2>/dev/null; printf '\\036'; done")
	if err != nil {
		return nil, fmt.Errorf("sshconn: shell %d: %w", shellPID, err)
	}
	var kids [][]string
	for _, cl := range strings.Split(string(b), "\x1e") {
		if cl = strings.TrimSuffix(cl, "\x00"); cl != "" {
			kids = append(kids, strings.Split(cl, "\x00"))
		}
	}
	return kids, nil
}
