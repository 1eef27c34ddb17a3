package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

// reapTimeout bounds how long Close waits for the shell to be reaped once
// everything in its session has been sent SIGKILL.
const reapTimeout = 5 * time.Second

// conn is a live local shell: its PTY master and its process, which leads
// its own session (so the session id is the shell's pid).
type conn struct {
	ptmx   *os.File
	cmd    *exec.Cmd
	pid    int
	runDir string
	grace  time.Duration
	guard  *guard // nil when execs are not judged
	files  fileServer

	done chan struct{} // closed once the shell has been reaped

	mu      sync.Mutex
	closing bool  // Close has been called
	err     error // why done was closed; set before close(done)

	closeOnce sync.Once
	closeErr  error
}

var _ shell.Conn = (*conn)(nil)

// Read reads terminal output from the PTY master.
func (c *conn) Read(p []byte) (int, error) {
	n, err := c.ptmx.Read(p)
	if err != nil {
		err = c.ioError("read", err)
	}
	return n, err
}

// Write types p into the terminal.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.ptmx.Write(p)
	if err != nil {
		err = c.ioError("write", err)
	}
	return n, err
}

// ioError maps a PTY master error: after Close, reads end with io.EOF and
// writes with os.ErrClosed; otherwise the shell and everything holding its
// terminal are gone (EIO), which is a lost connection.
func (c *conn) ioError(op string, err error) error {
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing || errors.Is(err, os.ErrClosed) {
		if op == "read" {
			return io.EOF
		}
		return fmt.Errorf("local shell: %s pty: %w", op, os.ErrClosed)
	}
	return fmt.Errorf("local shell: %s pty: %w: %w", op, shell.ErrConnectionLost, err)
}

// Resize sets the terminal's window size; the kernel sends SIGWINCH to the
// foreground process group.
func (c *conn) Resize(cols, rows int) error {
	if cols <= 0 || rows <= 0 || cols > 0xffff || rows > 0xffff {
		return fmt.Errorf("local shell: resize to %dx%d: size out of range", cols, rows)
	}
	ws := &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	err := c.control(func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
	if err != nil {
		return fmt.Errorf("local shell: resize: %w", err)
	}
	return nil
}

// SignalForeground sends sig to the terminal's foreground process group,
// found with TIOCGPGRP on the PTY master. shellPID must be a process of
// this session (normally the shell, which leads it). When shellPID's own
// process group is in the foreground, nothing is sent and the result is
// nil: no command runs in a process group of its own (it has just ended,
// or it is a shell builtin), and signalling the shell would end the whole
// session rather than a command.
func (c *conn) SignalForeground(ctx context.Context, shellPID int, sig syscall.Signal) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local shell: signal foreground: %w", err)
	}
	sh, err := readStat(shellPID)
	if err != nil || sh.sid != c.pid {
		return fmt.Errorf("local shell: signal foreground: pid %d is not a process of this session", shellPID)
	}
	var pgrp int
	err = c.control(func(fd int) (err error) {
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil {
		return fmt.Errorf("local shell: signal foreground: TIOCGPGRP: %w", err)
	}
	if pgrp <= 0 {
		return errors.New("local shell: signal foreground: the terminal has no foreground process group")
	}
	if pgrp == sh.pgrp {
		return nil
	}
	if err := unix.Kill(-pgrp, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("local shell: signal foreground: kill(-%d, %v): %w", pgrp, sig, err)
	}
	return nil
}

// control runs f on the PTY master's descriptor without switching it to
// blocking mode (which File.Fd would do).
func (c *conn) control(f func(fd int) error) error {
	rc, err := c.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// Close hangs up on the session, SIGKILLs whatever is left of it after the
// grace period, reaps the shell, closes the PTY and removes the run dir.
// Every call returns the result of the first.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()

		errs := []error{c.endSession()}
		select {
		case <-c.done:
		case <-time.After(reapTimeout):
			errs = append(errs, fmt.Errorf("shell pid %d not reaped after %v", c.pid, reapTimeout))
		}
		if c.guard != nil {
			c.guard.stop()
		}
		errs = append(errs, c.ptmx.Close(), os.RemoveAll(c.runDir))
		if err := errors.Join(errs...); err != nil {
			c.closeErr = fmt.Errorf("local shell: close: %w", err)
		}
	})
	return c.closeErr
}

// Done is closed when the shell process has exited and been reaped.
func (c *conn) Done() <-chan struct{} { return c.done }

// Err is nil until Done is closed, and nil if Close came first; otherwise
// it wraps shell.ErrConnectionLost with the shell's exit status.
func (c *conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// wait reaps the shell, records why it ended and closes done. A shell that
// exited on its own may leave background jobs behind; they belong to a
// session nobody can reach any more, so they are ended too.
func (c *conn) wait() {
	_ = c.cmd.Wait() // the status is in ProcessState
	c.mu.Lock()
	closing := c.closing
	if !closing {
		c.err = fmt.Errorf("local shell: %w", exitError(c.cmd.ProcessState))
	}
	c.mu.Unlock()
	close(c.done)
	if !closing {
		_ = c.endSession()
	}
}

// exitError says how the shell process ended on its own.
func exitError(ps *os.ProcessState) *shell.ExitError {
	e := &shell.ExitError{Where: "the local shell", Status: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = unix.SignalName(ws.Signal())
	}
	return e
}

// endSession ends every process of the shell's session: SIGHUP (and
// SIGCONT, so stopped jobs see it), then SIGKILL for whatever outlives the
// grace period.
func (c *conn) endSession() error {
	sid := c.pid
	signalSession(sid, unix.SIGHUP)
	signalSession(sid, unix.SIGCONT)
	if waitSessionEmpty(sid, c.grace) {
		return nil
	}
	deadline := time.Now().Add(reapTimeout)
	for {
		if signalSession(sid, unix.SIGKILL) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of session %d survive SIGKILL", sid)
		}
		time.Sleep(pollInterval)
	}
}

var (
	_ shell.ForegroundReporter = (*conn)(nil)
	_ shell.ProgramReporter    = (*conn)(nil)
	_ shell.EchoReporter       = (*conn)(nil)
	_ shell.ReplaceReporter    = (*conn)(nil)
)

var _ shell.StopReporter = (*conn)(nil)

// ShellStopped reports whether the shell process is stopped (state T).
func (c *conn) ShellStopped(shellPID int) (bool, error) {
	st, err := readStat(shellPID)
	if err != nil || st.sid != c.pid {
		return false, fmt.Errorf("local shell: pid %d is not a process of this session", shellPID)
	}
	return st.state == 'T' || st.state == 't', nil
}

// ShellReplaced reports whether the shell process no longer runs the bash
// tandem launched (bash --rcfile /dev/fd/3 -i): a command ran exec.
func (c *conn) ShellReplaced(shellPID int) (bool, error) {
	if st, err := readStat(shellPID); err != nil || st.sid != c.pid {
		return false, fmt.Errorf("local shell: pid %d is not a process of this session", shellPID)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shellPID))
	if err != nil {
		return false, fmt.Errorf("local shell: %w", err)
	}
	if len(b) == 0 {
		return false, nil // the shell exited and is not reaped yet
	}
	return !bytes.Contains(b, []byte("\x00--rcfile\x00/dev/fd/3\x00")), nil
}

// ShellInForeground reports whether the shell's own process group holds
// the terminal, i.e. no program it started is in the foreground.
func (c *conn) ShellInForeground() (bool, error) {
	var pgrp int
	err := c.control(func(fd int) (err error) {
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("local shell: TIOCGPGRP: %w", err)
	}
	return pgrp == c.pid, nil
}

// InterruptReady reports whether the shell's own process group holds
// the terminal, or a program that takes a Ctrl-C (see
// shell.TakesInterrupt).
func (c *conn) InterruptReady(shellPID int) (sh, ready bool, err error) {
	var pgrp int
	err = c.control(func(fd int) (err error) {
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	if err != nil {
		return false, false, fmt.Errorf("local shell: TIOCGPGRP: %w", err)
	}
	if pgrp == c.pid {
		return true, false, nil
	}
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", shellPID))
	if err != nil {
		return false, false, fmt.Errorf("local shell: %w", err)
	}
	leader, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pgrp)) // gone: empty
	return false, shell.TakesInterrupt(own, leader), nil
}

// InputEchoed reports whether keystrokes show on the terminal: false only
// in canonical mode with echo off, which is what password prompts use
// (readline and full-screen programs turn echo off too, but also leave
// canonical mode, and draw what is typed themselves).
func (c *conn) InputEchoed() (bool, error) {
	var lflag uint32
	err := c.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		lflag = t.Lflag
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("local shell: TCGETS: %w", err)
	}
	return lflag&unix.ECHO != 0 || lflag&unix.ICANON == 0, nil
}
