package sshconn

import (
	"net"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

func TestForegroundGroup(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int
		ok   bool
	}{
		{"1234 (bash) S 1 1234 1234 34816 5678 4194560 0 0", 5678, true},
		{"1234 (my prog) (x) S 1 1234 1234 34816 91 4194560", 91, true},
		{"1234 ()) ( S) R 1 1234 1234 0 -1 4194560", -1, true},
		{"1234 bash S 1 2 3 4 5", 0, false},
		{"1234 (bash) S 1 2", 0, false},
		{"1234 (bash) S 1 2 3 4 x", 0, false},
	} {
		got, err := foregroundGroup([]byte(tc.stat))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("foregroundGroup(%q) = %d, %v; want %d, ok=%v", tc.stat, got, err, tc.want, tc.ok)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/tmp/a b", `it's`, `$(rm -rf /)`, "`x`", `"q"`, "a\nb", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) round trip: %q, %v", s, out, err)
		}
	}
}

// dialSleeper dials a conn to a fresh sshd whose command is a sleep; the
// caller closes it.
func dialSleeper(t *testing.T) *conn {
	t.Helper()
	srv := testenv.SSHD(t)
	o := &Options{Host: srv.Host, Port: srv.Port, User: srv.User, KeyFile: srv.ClientKeyFile, KnownHostsFile: srv.KnownHostsFile}
	sc, err := o.Dial(t.Context(), shell.Launch{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	return sc.(*conn)
}

func TestDialDisablesNagle(t *testing.T) {
	c := dialSleeper(t)
	defer c.Close()
	raw, err := c.nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
	if gerr != nil || v == 0 {
		t.Fatalf("TCP_NODELAY = %d, %v", v, gerr)
	}
}

func TestHostKeyPolicyValidated(t *testing.T) {
	o := &Options{Host: "127.0.0.1", User: "u", Password: "p", KnownHostsFile: t.TempDir() + "/kh", HostKeyPolicy: "yes"}
	if _, err := o.Dial(t.Context(), shell.Launch{}); err == nil {
		t.Fatal("unknown HostKeyPolicy accepted")
	}
	o.HostKeyPolicy, o.KnownHostsFile = Strict, ""
	if _, err := o.Dial(t.Context(), shell.Launch{}); err == nil {
		t.Fatal("empty KnownHostsFile accepted")
	}
}

// TestCloseWithAnswerOwed: a question whose caller gave up leaves its
// answer owed, and the helper's reader holds it until the next question
// takes it. Close must not wait for that question (a session's last
// question, given up, made its Close hang for ever). The state is made
// exactly: one request more than the question waits for, so that its
// answer comes with no one to take it. Not parallel: it looks for the
// reader's goroutine among all of them.
func TestCloseWithAnswerOwed(t *testing.T) {
	c := dialSleeper(t)
	if _, err := c.ask(t.Context(), "stat 1\nstat 1\n", 1); err != nil {
		t.Fatal(err)
	}
	// The reader holds the second answer, waiting for someone to take it.
	for deadline := time.Now().Add(20 * time.Second); !readerHoldsAnswer(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the helper's reader never came to hold the unasked answer")
		}
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits 20 s after an answer was left owed")
	}
}

// readerHoldsAnswer says whether a helper's reader goroutine waits to hand
// over an answer.
func readerHoldsAnswer() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, " [select") && strings.Contains(g, "sshconn.(*conn).openHelper.func") {
			return true
		}
	}
	return false
}
