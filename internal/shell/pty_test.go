package shell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

// ptyDialer starts the launch command under /bin/sh in a real PTY, without
// a sandbox: the fast path for the engine's own tests.
type ptyDialer struct {
	t    testing.TB
	home string
	rc   string // content of ~/.bashrc, if any
}

type ptyConn struct {
	*os.File
	cmd    *exec.Cmd
	rundir string
	done   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	closed bool
	err    error
}

func (d *ptyDialer) Dial(ctx context.Context, l shell.Launch) (shell.Conn, error) {
	rundir, err := os.MkdirTemp("", "tandem-test-run-")
	if err != nil {
		return nil, err
	}
	home := d.home
	if home == "" {
		home = d.t.TempDir()
	}
	if d.rc != "" {
		if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte(d.rc), 0o600); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("/bin/sh", "-c", l.Command)
	cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"TERM=xterm-256color", "TANDEM_RUNDIR=" + rundir, "PS1=test$ "}, l.Env...)
	cmd.Dir = home
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(l.Cols), Rows: uint16(l.Rows)})
	if err != nil {
		return nil, err
	}
	c := &ptyConn{File: f, cmd: cmd, rundir: rundir, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		if !c.closed {
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.Exited() {
				c.err = &shell.ExitError{Where: "the test shell", Status: exit.ExitCode()}
			} else {
				c.err = errors.Join(shell.ErrConnectionLost, err)
			}
		}
		c.mu.Unlock()
		close(c.done)
	}()
	d.t.Cleanup(func() { _ = c.Close() })
	return c, nil
}

func (c *ptyConn) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	if err != nil {
		<-c.done
		if e := c.Err(); e != nil {
			return n, e
		}
		return n, io.EOF
	}
	return n, nil
}

func (c *ptyConn) Resize(cols, rows int) error {
	return pty.Setsize(c.File, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
}

func (c *ptyConn) OpenRelay(ctx context.Context, dir string) (*shell.Relay, error) {
	in, err := os.OpenFile(filepath.Join(dir, "in"), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	out, err := os.Open(filepath.Join(dir, "out"))
	if err != nil {
		return nil, err
	}
	errf, err := os.Open(filepath.Join(dir, "err"))
	if err != nil {
		return nil, err
	}
	return &shell.Relay{Stage: in, Stdout: out, Stderr: errf}, nil
}

func (c *ptyConn) SignalForeground(ctx context.Context, pid int, sig syscall.Signal) error {
	pgrp, err := unix.IoctlGetInt(int(c.File.Fd()), unix.TIOCGPGRP)
	if err != nil {
		return err
	}
	return syscall.Kill(-pgrp, sig)
}

func (c *ptyConn) InterruptReady(shellPID int) (sh, ready bool, err error) {
	pgrp, err := unix.IoctlGetInt(int(c.File.Fd()), unix.TIOCGPGRP)
	if err != nil || pgrp == shellPID {
		return err == nil, false, err
	}
	own, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", shellPID))
	if err != nil {
		return false, false, err
	}
	leader, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pgrp))
	return false, shell.TakesInterrupt(own, leader), nil
}

func (c *ptyConn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		_ = c.cmd.Process.Kill()
		<-c.done
		_ = c.File.Close()
		_ = os.RemoveAll(c.rundir)
	})
	return nil
}

func (c *ptyConn) Done() <-chan struct{} { return c.done }

func (c *ptyConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *ptyConn) OpenPair(ctx context.Context, dir, name string) (io.ReadCloser, io.ReadCloser, error) {
	out, err := os.Open(filepath.Join(dir, "out."+name))
	if err != nil {
		return nil, nil, err
	}
	errf, err := os.Open(filepath.Join(dir, "err."+name))
	if err != nil {
		_ = out.Close()
		return nil, nil, err
	}
	return out, errf, nil
}
