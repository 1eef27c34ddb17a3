package sshconn_test

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// typingGap is less than the time a person takes from seeing a prompt to
// their first key: the mode must be known by then.
const typingGap = time.Second

// TestShellInputEchoed: the server's terminal mode is read afresh at every
// question, right as each prompt appears: echoing at bash's prompt and a
// plain read, hidden at read -s, getpass and a program that turned echo
// off itself, echoing again after.
func TestShellInputEchoed(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(t, "python3 not found: %v", err)
	}
	c, tm := startBash(t, options(testenv.SSHD(t)))
	er, ok := c.(shell.ShellEchoReporter)
	if !ok {
		t.Fatal("the ssh conn does not report the terminal's echo")
	}
	tm.send(t, "echo PID=$$=\r")
	pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])
	tm.waitFor(t, `[$#] $`)

	echoed := func(t *testing.T, want bool) {
		t.Helper()
		start := time.Now()
		got, err := er.ShellInputEchoed(t.Context(), pid)
		took := time.Since(start)
		if err != nil || got != want {
			t.Fatalf("ShellInputEchoed = %v, %v; want %v", got, err, want)
		}
		t.Logf("answered %v in %v", got, took)
		if took > typingGap {
			t.Errorf("the answer took %v, longer than a person takes to type", took)
		}
	}
	echoed(t, true) // bash's readline: not canonical, it draws the keys itself

	for _, tc := range []struct {
		name   string
		line   string // typed at bash's prompt; it prints prompt, then reads
		prompt string
		echo   bool
	}{
		{"read", `read -r -p 'Name: ' v; echo "got=$v="`, `Name: $`, true},
		{"read -s", `read -rs -p 'Password: ' v; echo; echo "got=$v="`, `Password: $`, false},
		{"getpass", `python3 -c 'import getpass; print("got=" + getpass.getpass("Pass: ") + "=")'`, `Pass: $`, false},
		{"stty -echo", `stty -echo; printf 'Code: '; read -r v; stty echo; echo; echo "got=$v="`, `Code: $`, false},
		{"head", `printf 'Line: '; head -n1 | sed 's/.*/got=&=/'`, `Line: $`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm.send(t, tc.line+"\r")
			tm.waitFor(t, tc.prompt)
			echoed(t, tc.echo)
			tm.send(t, "x1\r")
			tm.waitFor(t, `got=x1=`)
			tm.waitFor(t, `[$#] $`)
		})
	}
	echoed(t, true)

	// The shell's terminal is gone once it exits: the mode is unknown.
	tm.send(t, "exit\r")
	select {
	case <-c.Done():
	case <-time.After(wait):
		t.Fatal("the shell did not exit")
	}
	if _, err := er.ShellInputEchoed(t.Context(), pid); err == nil {
		t.Fatal("ShellInputEchoed succeeded after the shell exited")
	}
}

// TestShellInputEchoedUnknownShell: a pid that is no shell's on the server
// is an error, not an answer; so is a closed conn.
func TestShellInputEchoedUnknownShell(t *testing.T) {
	t.Parallel()
	c, _ := startBash(t, options(testenv.SSHD(t)))
	er := c.(shell.ShellEchoReporter)
	for _, pid := range []int{0, -1, 999999999} {
		if on, err := er.ShellInputEchoed(t.Context(), pid); err == nil {
			t.Errorf("pid %d: ShellInputEchoed = %v, want an error", pid, on)
		}
	}
	c.Close()
	if _, err := er.ShellInputEchoed(t.Context(), 1); err == nil {
		t.Error("ShellInputEchoed succeeded on a closed conn")
	}
}
