package sshconn

import (
	"bytes"
	"context"
	"errors"
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
// children on the server: through the conn's helper (no login), or on an
// exec channel of its own while the helper is down.
func (c *conn) ShellChildren(shellPID int) (self []string, kids [][]string, err error) {
	if shellPID <= 0 {
		return nil, nil, fmt.Errorf("sshconn: invalid pid %d", shellPID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	a, err := c.question(ctx, "children", shellPID, "")
	switch {
	case err == nil && a.err != "":
		return nil, nil, fmt.Errorf("sshconn: shell %d: children: %s", shellPID, a.err)
	case err == nil:
		all, err := helperChildren(a.data)
		if err != nil {
			return nil, nil, err
		}
		self, kids = shellAndChildren(all)
		return self, kids, nil
	case !errors.Is(err, errHelperDown):
		return nil, nil, fmt.Errorf("sshconn: shell %d: children: %w", shellPID, err)
	}
	p := strconv.Itoa(shellPID)
	b, err := c.exec(ctx, "for c in "+p+" $(cat /proc/"+p+"/task/"+p+"/children); do cat /proc/$c/cmdline 2>/dev/null; printf '\\036'; done")
	if err != nil {
		return nil, nil, fmt.Errorf("sshconn: shell %d: %w", shellPID, err)
	}
	var all [][]string
	for _, cl := range strings.Split(string(b), "\x1e") {
		var argv []string
		if cl = strings.TrimSuffix(cl, "\x00"); cl != "" {
			argv = strings.Split(cl, "\x00")
		}
		all = append(all, argv)
	}
	self, kids = shellAndChildren(all)
	return self, kids, nil
}

// shellAndChildren splits the command lines of the shell (first) and of
// its children; a child that ended meanwhile (no command line) is left
// out.
func shellAndChildren(all [][]string) (self []string, kids [][]string) {
	for i, argv := range all {
		switch {
		case i == 0:
			self = argv
		case argv != nil:
			kids = append(kids, argv)
		}
	}
	return self, kids
}

// helperChildren reads the helper's answer to children: "P" and a pid
// start a process (the shell first), "A" lines are its arguments.
func helperChildren(data []string) ([][]string, error) {
	var all [][]string
	for _, l := range data {
		switch {
		case strings.HasPrefix(l, "P"):
			all = append(all, nil)
		case strings.HasPrefix(l, "A") && len(all) > 0:
			all[len(all)-1] = append(all[len(all)-1], l[1:])
		default:
			return nil, fmt.Errorf("sshconn: children: unexpected line %q", l)
		}
	}
	return all, nil
}
