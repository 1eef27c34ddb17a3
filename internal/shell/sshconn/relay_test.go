package sshconn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// readN reads exactly n bytes from r, failing t after the wait deadline.
func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(r, b)
		got <- b[:k]
	}()
	select {
	case b := <-got:
		if len(b) != n {
			t.Fatalf("read %q, want %d bytes", b, n)
		}
		return b
	case <-time.After(wait):
		t.Fatalf("no %d bytes after %v", n, wait)
		return nil
	}
}

// relayShell starts bash holding the FIFOs "in", "out" and "err" of a
// fresh directory on fds 9, 7 and 8, and returns the directory.
func relayShell(t *testing.T, o *sshconn.Options) (shell.Conn, *term, string) {
	t.Helper()
	c, tm := startBash(t, o)
	tm.send(t, `d=$(mktemp -d) && cd "$d" && mkfifo in out err && exec 7<>out 8<>err 9<>in && echo "DIR=$d="`+"\r")
	dir := tm.waitFor(t, `DIR=(/[^=]+)=`)[1]
	t.Cleanup(func() { os.RemoveAll(dir) })
	return c, tm, dir
}

func TestOpenRelay(t *testing.T) {
	t.Parallel()
	c, tm, dir := relayShell(t, options(testenv.SSHD(t)))
	r, err := c.OpenRelay(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })

	// Output: exact bytes, NUL and 0xff included, no newline added.
	tm.send(t, `printf 'a\000\377b' >&7; printf 'e\000\377r' >&8`+"\r")
	if got := readN(t, r.Stdout, 4); !bytes.Equal(got, []byte("a\x00\xffb")) {
		t.Fatalf("stdout %q", got)
	}
	if got := readN(t, r.Stderr, 4); !bytes.Equal(got, []byte("e\x00\xffr")) {
		t.Fatalf("stderr %q", got)
	}
	tm.send(t, `printf END >&7; printf ERR >&8`+"\r")
	if got := readN(t, r.Stdout, 3); string(got) != "END" {
		t.Fatalf("stdout continues with %q, want END", got)
	}
	if got := readN(t, r.Stderr, 3); string(got) != "ERR" {
		t.Fatalf("stderr continues with %q, want ERR", got)
	}

	// Stage: bytes written arrive at once (Stage stays open) and exactly.
	staged := []byte("ls -l\x00\xff\n")
	if n, err := r.Stage.Write(staged); err != nil || n != len(staged) {
		t.Fatalf("Stage.Write: %d, %v", n, err)
	}
	tm.send(t, fmt.Sprintf("head -c %d <&9 | od -An -tx1 | tr -d ' \\n'; echo\r", len(staged)))
	tm.waitFor(t, fmt.Sprintf("%x", staged))
}

func TestOpenRelayWithoutFIFOs(t *testing.T) {
	t.Parallel()
	c, _ := startBash(t, options(testenv.SSHD(t)))
	dir := t.TempDir() // sshd runs on this machine
	_, err := c.OpenRelay(t.Context(), dir)
	if err == nil || !strings.Contains(err.Error(), dir+"/in is not a FIFO") {
		t.Fatalf("OpenRelay on a plain directory: %v", err)
	}
}

func TestRelayCloseEndsRemoteReaders(t *testing.T) {
	t.Parallel()
	c, _, dir := relayShell(t, options(testenv.SSHD(t)))
	r, err := c.OpenRelay(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// sshd runs on this machine: its relay processes (sh and the two
	// FIFO readers) name dir.
	deadline := time.Now().Add(wait)
	for len(processesNaming(t, dir)) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("relay processes not found: %v", processesNaming(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(wait)
	for len(processesNaming(t, dir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("relay processes %v outlive Relay.Close", processesNaming(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := r.Stdout.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("Read after Close: %v", err)
	}
}

// processesNaming lists live processes whose command line contains s.
func processesNaming(t *testing.T, s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) && !bytes.Contains(stat, []byte(") Z")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestRelayReportsConnectionLost(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	c, _, dir := relayShell(t, options(srv))
	r, err := c.OpenRelay(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	srv.Kill()
	done := make(chan error, 1)
	go func() { _, err := r.Stdout.Read(make([]byte, 1)); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, shell.ErrConnectionLost) {
			t.Fatalf("relay Read after sshd died: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("relay Read still blocked")
	}
}

func TestSignalForeground(t *testing.T) {
	t.Parallel()
	c, tm := startBash(t, options(testenv.SSHD(t)))
	tm.send(t, "echo PID=$$=\r")
	pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])

	err := c.SignalForeground(t.Context(), pid, syscall.SIGTERM)
	if !errors.Is(err, sshconn.ErrNoForeground) {
		t.Fatalf("signal with the shell in the foreground: %v, want ErrNoForeground", err)
	}

	tm.send(t, "sleep 100\r")
	tm.send(t, "echo status=$?\r") // typed ahead; runs once sleep ends
	// The job reaches the foreground shortly after bash reads the line.
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	for {
		err := c.SignalForeground(ctx, pid, syscall.SIGTERM)
		if err == nil {
			break
		}
		if !errors.Is(err, sshconn.ErrNoForeground) || ctx.Err() != nil {
			t.Fatalf("SignalForeground: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	tm.waitFor(t, `status=143`)

	if err := c.SignalForeground(t.Context(), 999999999, syscall.SIGTERM); err == nil || !strings.Contains(err.Error(), "999999999") {
		t.Fatalf("signal for a missing pid: %v", err)
	}
}
