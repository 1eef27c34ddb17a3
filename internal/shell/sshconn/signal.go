package sshconn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

// SignalForeground finds the foreground process group of shellPID's
// terminal in /proc/PID/stat and sends sig to that group with kill(1), on
// short exec channels. It needs Linux on the server but not procps. It
// refuses, with ErrNoForeground, when the shell itself is in the
// foreground, since the signal would then hit the shell.
func (c *conn) SignalForeground(ctx context.Context, shellPID int, sig syscall.Signal) error {
	if err := c.signalForeground(ctx, shellPID, sig); err != nil {
		return fmt.Errorf("sshconn: signal foreground job of shell %d: %w", shellPID, err)
	}
	return nil
}

func (c *conn) signalForeground(ctx context.Context, shellPID int, sig syscall.Signal) error {
	name := strings.TrimPrefix(unix.SignalName(sig), "SIG")
	if name == "" {
		return fmt.Errorf("unknown signal %d", int(sig))
	}
	if shellPID <= 0 {
		return fmt.Errorf("invalid pid %d", shellPID)
	}
	stat, err := c.procFileCtx(ctx, shellPID, "stat")
	if err != nil {
		return err
	}
	pgid, err := foregroundGroup(stat)
	switch {
	case err != nil:
		return err
	case pgid <= 0:
		return fmt.Errorf("%w: the shell has no controlling terminal", ErrNoForeground)
	case pgid == shellPID:
		return fmt.Errorf("%w: the shell itself is in the foreground", ErrNoForeground)
	}
	err = c.killGroup(ctx, pgid, name)
	if err != nil && strings.Contains(err.Error(), "No such process") {
		return fmt.Errorf("%w: process group %d ended meanwhile: %w", ErrNoForeground, pgid, err)
	}
	return err
}

// foregroundGroup returns tpgid, field 8 of a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may contain spaces and
// parentheses itself, so fields are counted after the last ')'.
func foregroundGroup(stat []byte) (int, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", stat)
	}
	// After ')': state(3) ppid(4) pgrp(5) session(6) tty_nr(7) tpgid(8).
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 6 {
		return 0, fmt.Errorf("malformed /proc stat %q", stat)
	}
	tpgid, err := strconv.Atoi(f[5])
	if err != nil {
		return 0, fmt.Errorf("malformed tpgid in /proc stat %q", stat)
	}
	return tpgid, nil
}

// InterruptReady reads, through the conn's helper, which process group
// holds the terminal of shell shellPID (/proc/PID/stat) and whether its
// leader takes a Ctrl-C (see shell.TakesInterrupt).
func (c *conn) InterruptReady(shellPID int) (sh, ready bool, err error) {
	if shellPID <= 0 {
		return false, false, fmt.Errorf("sshconn: invalid pid %d", shellPID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	// One round trip to the helper: the shell's stat and status, and the
	// status of the leader of the group that holds its terminal.
	a, err := c.ask(ctx, "fg "+strconv.Itoa(shellPID)+"\n", 3)
	if err == nil {
		if a[0].err != "" || len(a[0].data) == 0 {
			return false, false, fmt.Errorf("sshconn: shell %d: %s", shellPID, a[0].err)
		}
		pgid, err := foregroundGroup([]byte(strings.Join(a[0].data, "\n")))
		switch {
		case err != nil:
			return false, false, fmt.Errorf("sshconn: %w", err)
		case pgid == shellPID:
			return true, false, nil
		case pgid <= 0:
			return false, true, nil
		case a[1].err != "":
			return false, false, fmt.Errorf("sshconn: shell %d: %s", shellPID, a[1].err)
		}
		var leader []byte // gone: empty
		if a[2].err == "" {
			leader = []byte(strings.Join(a[2].data, "\n"))
		}
		return false, shell.TakesInterrupt([]byte(strings.Join(a[1].data, "\n")), leader), nil
	}
	if !errors.Is(err, errHelperDown) {
		return false, false, fmt.Errorf("sshconn: shell %d: %w", shellPID, err)
	}
	stat, err := c.procFile(shellPID, "stat")
	if err != nil {
		return false, false, err
	}
	pgid, err := foregroundGroup(stat)
	switch {
	case err != nil:
		return false, false, fmt.Errorf("sshconn: %w", err)
	case pgid == shellPID:
		return true, false, nil
	case pgid <= 0:
		return false, true, nil
	}
	own, err := c.procFile(shellPID, "status")
	if err != nil {
		return false, false, err
	}
	leader, _ := c.procFile(pgid, "status") // gone: empty
	return false, shell.TakesInterrupt(own, leader), nil
}

var _ shell.ProgramReporter = (*conn)(nil)

// exec runs cmd on its own channel and returns its stdout; a failure
// carries its stderr.
func (c *conn) exec(ctx context.Context, cmd string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	s, err := c.openSession(ctx, func(s *ssh.Session) error {
		s.Stdout, s.Stderr = &stdout, &stderr
		return s.Run(cmd)
	})
	if err != nil {
		var exit *ssh.ExitError
		if errors.As(err, &exit) {
			return nil, fmt.Errorf("%s: %v: %s", cmd, err, strings.TrimSpace(stderr.String()))
		}
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	s.Close()
	return stdout.Bytes(), nil
}

// ShellReplaced reads /proc/PID/cmdline of the shell on its own exec
// channel: a shell that no longer runs the bash tandem launched
// (bash --rcfile /dev/fd/3 -i) ran exec, and lost tandem's integration.
func (c *conn) ShellReplaced(shellPID int) (bool, error) {
	b, err := c.procFile(shellPID, "cmdline")
	if err != nil {
		return false, err
	}
	if len(b) == 0 {
		return false, nil // the shell exited and is not reaped yet
	}
	return !bytes.Contains(b, []byte("\x00--rcfile\x00/dev/fd/3\x00")), nil
}

// ShellStopped reads the shell's state from /proc/PID/stat on its own exec
// channel: T (or t) means stopped.
func (c *conn) ShellStopped(shellPID int) (bool, error) {
	stat, err := c.procFile(shellPID, "stat")
	if err != nil {
		return false, err
	}
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return false, fmt.Errorf("sshconn: malformed /proc stat %q", stat)
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) == 0 {
		return false, fmt.Errorf("sshconn: malformed /proc stat %q", stat)
	}
	return f[0] == "T" || f[0] == "t", nil
}

// procFile reads /proc/PID/NAME of a process on the server within
// procTimeout: through the conn's helper, or on an exec channel of its
// own (a login, rc and all) while the helper is down.
func (c *conn) procFile(pid int, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	return c.procFileCtx(ctx, pid, name)
}

// procFileCtx is procFile within ctx.
func (c *conn) procFileCtx(ctx context.Context, pid int, name string) ([]byte, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("sshconn: invalid pid %d", pid)
	}
	b, err := c.helperFile(ctx, pid, name)
	if err == nil || !errors.Is(err, errHelperDown) {
		return b, err
	}
	b, err = c.exec(ctx, "cat /proc/"+strconv.Itoa(pid)+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("sshconn: shell %d: %w", pid, err)
	}
	return b, nil
}

// killGroup sends the signal named sig (without SIG) to process group
// pgid: through the helper, or on an exec channel while it is down.
func (c *conn) killGroup(ctx context.Context, pgid int, sig string) error {
	a, err := c.question(ctx, "kill", pgid, sig)
	switch {
	case err == nil && a.err != "":
		return fmt.Errorf("kill -s %s -- -%d: %s", sig, pgid, a.err)
	case err == nil:
		return nil
	case !errors.Is(err, errHelperDown):
		return err
	}
	_, err = c.exec(ctx, "kill -s "+sig+" -- -"+strconv.Itoa(pgid))
	return err
}

// procTimeout bounds one look at the server's /proc.
const procTimeout = 5 * time.Second
