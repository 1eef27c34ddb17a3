package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestShell runs one command per case in a fresh sandboxed bash and waits
// for the output it must produce. {ws}, {probe}, {name} and {pid} in cmd
// and want stand for the workspace, a readable file outside the sandbox, a
// unique file name and the test's own pid (want is a regexp; the values are
// quoted into it).
func TestShell(t *testing.T) {
	outside, probe := probeOutside(t)
	name := filepath.Base(outside)

	tests := []struct {
		name  string
		cmd   string
		want  string
		check func(t *testing.T, ws string)
	}{
		{name: "echo", cmd: `echo "out-$((6*7))"`, want: `out-42\r\n`},
		{name: "cwd is the workspace", cmd: `echo "cwd=$(pwd -P)|"`, want: `cwd={ws}\|`},
		{name: "environment", cmd: `echo "home=${HOME#"$TANDEM_RUNDIR"} term=$TERM tmp=${TMPDIR#"$TANDEM_RUNDIR"} editor=$GIT_EDITOR pager=$PAGER|"`, want: `home=/home term=xterm-256color tmp=/tmp editor=true pager=cat\|`},
		{name: "write in workspace", cmd: `echo data > f && mkdir a b && mv f a/ && mv a/f b/ && cat b/f && echo "w-$((1+1))"`,
			want: `data\r\nw-2`,
			check: func(t *testing.T, ws string) {
				if b, err := os.ReadFile(filepath.Join(ws, "b", "f")); err != nil || string(b) != "data\n" {
					t.Errorf("workspace file: %q, %v", b, err)
				}
			}},
		{name: "TMPDIR writable", cmd: `echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && echo "tmp-$((2+2))"`, want: `t\r\ntmp-4`},
		{name: "terminal devices", cmd: `stty size </dev/tty && echo x >/dev/null && echo "dev-$((3+3))"`, want: `40 120\r\ndev-6`},
		{name: "read outside denied", cmd: `cat {probe}; echo "rc=$?"`, want: `Permission denied\r\nrc=1`},
		{name: "list outside denied", cmd: `ls {probedir}; echo "rc=$?"`, want: `Permission denied.*\r\nrc=2`},
		{name: "home of root denied", cmd: `ls /root; echo "rc=$?"`, want: `Permission denied.*\r\nrc=2`},
		{name: "write etc denied", cmd: `touch /etc/{name}; echo "rc=$?"`, want: `Permission denied\r\nrc=1`,
			check: func(t *testing.T, _ string) { mustNotExist(t, "/etc/"+name) }},
		{name: "write tmp denied", cmd: `echo x > /tmp/{name}; echo "rc=$?"`, want: `Permission denied\r\nrc=1`,
			check: func(t *testing.T, _ string) { mustNotExist(t, "/tmp/"+name) }},
		{name: "signal outside denied", cmd: `kill -0 {pid}; echo "rc=$?"`, want: `Operation not permitted\r\nrc=1`},
		{name: "no capabilities", cmd: `echo "caps=$(grep -c '^CapEff:.0*$' /proc/self/status)"`, want: `caps=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tm := startTerm(t, sandboxed(t))
			ws, err := filepath.EvalSymlinks(tm.ws)
			if err != nil {
				t.Fatal(err)
			}
			subst := func(quote func(string) string) *strings.Replacer {
				return strings.NewReplacer("{ws}", quote(ws), "{probe}", quote(probe), "{probedir}", quote(outside),
					"{name}", quote(name), "{pid}", quote(fmt.Sprint(os.Getpid())))
			}
			tm.send(subst(func(s string) string { return s }).Replace(tt.cmd))
			tm.expect(subst(regexp.QuoteMeta).Replace(tt.want))
			if tt.check != nil {
				tt.check(t, ws)
			}
		})
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		os.Remove(path)
		t.Errorf("%s was created", path)
	}
}

func TestNoSandboxReadsOutside(t *testing.T) {
	_, probe := probeOutside(t)
	tm := startTerm(t, &Options{Workspace: t.TempDir(), NoSandbox: true, KillGrace: 300 * time.Millisecond})
	tm.send(`cat ` + probe + `; echo "rc=$?"`)
	tm.expect(`s3cret\r\nrc=0`)
}

func TestNetwork(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		t.Run(fmt.Sprintf("allowed=%v", allowed), func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			var accepted atomic.Int32
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					accepted.Add(1)
					c.Close()
				}
			}()
			o := sandboxed(t)
			o.Network = allowed
			tm := startTerm(t, o)
			port := ln.Addr().(*net.TCPAddr).Port
			tm.send(fmt.Sprintf(`: <>/dev/tcp/127.0.0.1/%d; echo "net-rc=$?"`, port))
			if allowed {
				tm.expect(`net-rc=0`)
				poll(t, "the listener to accept", func() bool { return accepted.Load() == 1 },
					func() string { return fmt.Sprintf("accepted %d", accepted.Load()) })
				return
			}
			tm.expect(`Permission denied\r\nnet-rc=1`)
			if n := accepted.Load(); n != 0 {
				t.Fatalf("listener accepted %d connections from a shell without network", n)
			}
		})
	}
}

func TestResize(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	if err := tm.conn.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	tm.send(`echo "size=$(stty size)"`)
	tm.expect(`size=30 100`)
	if err := tm.conn.Resize(0, 30); err == nil {
		t.Error("Resize(0, 30) succeeded")
	}
}

func TestCloseKillsSession(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	tm.send(`sleep 1000 & echo "bg=$!"`)
	plain := tm.expectInt(`bg=(\d+)`)
	// This one ignores SIGHUP, so only the SIGKILL after the grace ends it.
	tm.send(`(trap '' HUP; exec sleep 1001) & echo "stubborn=$!"`)
	stubborn := tm.expectInt(`stubborn=(\d+)`)
	shellPID := tm.conn.(*conn).pid
	for _, pid := range []int{plain, stubborn} {
		poll(t, fmt.Sprintf("pid %d to be sleep in the shell's session", pid), func() bool {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			st, err := readStat(pid)
			return err == nil && st.sid == shellPID && string(comm) == "sleep\n"
		}, tm.output)
	}
	runDir := tm.conn.(*conn).runDir

	if err := tm.conn.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range []int{shellPID, plain, stubborn} {
		if !processGone(pid) {
			t.Errorf("pid %d still alive after Close", pid)
		}
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run dir %s still there: %v", runDir, err)
	}
	select {
	case <-tm.conn.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if err := tm.conn.Err(); err != nil {
		t.Errorf("Err after Close = %v, want nil", err)
	}
	<-tm.eof
	if !errors.Is(tm.readErr, io.EOF) {
		t.Errorf("Read after Close = %v, want io.EOF", tm.readErr)
	}
	if err := tm.conn.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestSignalForeground(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	tm.send(`echo "pid=$$"`)
	shellPID := tm.expectInt(`pid=(\d+)`)
	ctx := t.Context()

	// With the shell in the foreground nothing is sent; even SIGKILL
	// leaves the session alive.
	if err := tm.conn.SignalForeground(ctx, shellPID, syscall.SIGKILL); err != nil {
		t.Errorf("SignalForeground with the shell in the foreground: %v", err)
	}
	if err := tm.conn.SignalForeground(ctx, os.Getpid(), syscall.SIGINT); err == nil {
		t.Error("SignalForeground with a pid outside the session succeeded")
	}

	tm.send(`echo "alive-$((8*8))"`)
	tm.expect(`alive-64`)

	tm.send(`sleep 100`)
	poll(t, "sleep to run in the foreground", func() bool {
		for _, pid := range sessionMembers(shellPID) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			st, err := readStat(pid)
			if string(comm) == "sleep\n" && err == nil && st.pgrp == pid {
				return true
			}
		}
		return false
	}, tm.output)
	if err := tm.conn.SignalForeground(ctx, shellPID, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// bash abandons the rest of a line whose command died of SIGINT, so the
	// status is asked for on the next line.
	tm.send(`echo "after=$?"`)
	tm.expect(`after=130`)
}

func TestRelay(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	tm.send(`d=$TANDEM_RUNDIR; mkfifo "$d"/in "$d"/out "$d"/err && exec 7<>"$d"/in 8<>"$d"/out 9<>"$d"/err; echo "rd=$d|"`)
	dir := tm.expect(`rd=(/[^|]*)\|`)[1]
	if dir != tm.conn.(*conn).runDir {
		t.Fatalf("TANDEM_RUNDIR = %q, want %q", dir, tm.conn.(*conn).runDir)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	r, err := tm.conn.OpenRelay(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// In: bytes written to Stage arrive unchanged at the shell's fd 7.
	if _, err := r.Stage.Write([]byte("a\x00b\xffc")); err != nil {
		t.Fatal(err)
	}
	tm.send(`head -c 5 <&7 | od -An -tx1 | tr -d ' \n'; echo "|in"`)
	tm.expect(`610062ff63\|in`)

	// Out: the shell's fds 8 and 9 arrive unchanged, without a newline.
	tm.send(`printf 'x\000y\377z' >&8; printf 'e\000\377' >&9`)
	for _, s := range []struct {
		name string
		r    io.Reader
		want string
	}{{"stdout", r.Stdout, "x\x00y\xffz"}, {"stderr", r.Stderr, "e\x00\xff"}} {
		if f, ok := s.r.(*os.File); ok {
			_ = f.SetReadDeadline(time.Now().Add(waitFor))
		}
		got := make([]byte, len(s.want))
		if _, err := io.ReadFull(s.r, got); err != nil || string(got) != s.want {
			t.Errorf("%s: read %q, %v; want %q", s.name, got, err, s.want)
		}
	}
}

func TestOpenRelayRefusesNonFIFO(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	tm.send(`d=$TANDEM_RUNDIR; mkfifo "$d"/in "$d"/err && exec 7<>"$d"/in 9<>"$d"/err; ln -s /etc/hostname "$d"/out; echo "ok-$((5*5))"`)
	tm.expect(`ok-25`)
	_, err := tm.conn.OpenRelay(t.Context(), tm.conn.(*conn).runDir)
	if err == nil {
		t.Fatal("OpenRelay followed a symlink planted by the shell")
	}
}

func TestShellExit(t *testing.T) {
	tm := startTerm(t, sandboxed(t))
	tm.send(`exit 3`)
	select {
	case <-tm.conn.Done():
	case <-time.After(waitFor):
		t.Fatalf("Done not closed after exit; output:\n%s", tm.output())
	}
	err := tm.conn.Err()
	var exit *shell.ExitError
	if !errors.As(err, &exit) || exit.Status != 3 || exit.Signal != "" || !errors.Is(err, shell.ErrShellExited) {
		t.Errorf("Err = %v, want a shell exit with status 3", err)
	}
	select {
	case <-tm.eof:
	case <-time.After(waitFor):
		t.Fatal("Read did not fail after the shell exited")
	}
	if !errors.Is(tm.readErr, shell.ErrConnectionLost) {
		t.Errorf("Read error = %v, want it to wrap ErrConnectionLost", tm.readErr)
	}
	if err := tm.conn.Close(); err != nil {
		t.Errorf("Close after exit: %v", err)
	}
	if err := tm.conn.Err(); !errors.Is(err, shell.ErrShellExited) {
		t.Errorf("Err after Close = %v; the exit came first", err)
	}
}

func TestDialRefuses(t *testing.T) {
	ws := t.TempDir()
	tests := []struct {
		name string
		o    Options
	}{
		{"no workspace", Options{Self: self}},
		{"relative workspace", Options{Workspace: "ws", Self: self}},
		{"missing workspace", Options{Workspace: filepath.Join(ws, "nope"), Self: self}},
		{"no launcher", Options{Workspace: ws}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := tt.o.Dial(t.Context(), bash()); err == nil {
				c.Close()
				t.Fatal("Dial succeeded")
			}
		})
	}
}

// probeOutside makes a directory outside every sandbox grant, holding a
// readable file "secret" (s3cret), removed when the test ends.
func probeOutside(t *testing.T) (dir, probe string) {
	t.Helper()
	dir, err := os.MkdirTemp("/", "tandem-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	probe = filepath.Join(dir, "secret")
	if err := os.WriteFile(probe, []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, probe
}
