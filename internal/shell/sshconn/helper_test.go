package sshconn_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestQuestionsCostNoLogin: bash run by sshd reads ~/.bashrc for every
// exec channel, so a login whose rc is slow (pyenv init) paid for it at
// every look at the server's processes, and a viewer's Ctrl-C waited for
// several. The conn's questions (the terminal's echo, who holds the
// terminal, exec, stopped, a signal) must not start a login each: the rc,
// which counts its runs in a file, runs for the shell and for the conn's
// helper, and no more however many questions are asked.
func TestQuestionsCostNoLogin(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	runs := filepath.Join(t.TempDir(), "rc-runs")
	rc := "echo run >>" + strconv.Quote(runs) + "\necho 'rc output the helper must skip'\n"
	if err := os.WriteFile(filepath.Join(srv.Home, ".bashrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, tm := startBash(t, options(srv))
	tm.send(t, "echo PID=$$=\r")
	pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])
	tm.waitFor(t, `[$#] $`)

	ask := func(t *testing.T, wantShell bool) {
		t.Helper()
		if on, err := c.(shell.ShellEchoReporter).ShellInputEchoed(t.Context(), pid); err != nil || !on {
			t.Fatalf("ShellInputEchoed = %v, %v", on, err)
		}
		sh, _, err := c.(shell.ProgramReporter).InterruptReady(pid)
		if err != nil || sh != wantShell {
			t.Fatalf("InterruptReady: shell holds the terminal = %v, %v; want %v", sh, err, wantShell)
		}
		// This bash is not tandem's (bash --rcfile /dev/fd/3 -i).
		if r, err := c.(interface{ ShellReplaced(int) (bool, error) }).ShellReplaced(pid); err != nil || !r {
			t.Fatalf("ShellReplaced = %v, %v; want true", r, err)
		}
		if st, err := c.(interface{ ShellStopped(int) (bool, error) }).ShellStopped(pid); err != nil || st {
			t.Fatalf("ShellStopped = %v, %v", st, err)
		}
		// Whether the terminal's foreground waits for keys: bash at its
		// prompt does, sleep does not.
		if w, err := c.(shell.ShellInputWaiter).WaitingForInputOf(t.Context(), pid); err != nil || w != wantShell {
			t.Fatalf("WaitingForInputOf = %v, %v; want %v", w, err, wantShell)
		}
		// What runs in the shell's process, and what runs under it.
		if name, err := c.(shell.ShellProgramNamer).ShellProgram(pid); err != nil || name != "bash" {
			t.Fatalf("ShellProgram = %q, %v", name, err)
		}
		self, kids, err := c.(shell.ChildLister).ShellChildren(pid)
		wantKids := [][]string{{"sleep", "100"}}
		if wantShell {
			wantKids = nil
		}
		if err != nil || len(self) == 0 || filepath.Base(self[0]) != "bash" || !reflect.DeepEqual(kids, wantKids) {
			t.Fatalf("ShellChildren = %q, %q, %v; want bash, %q", self, kids, err, wantKids)
		}
	}
	for range 10 {
		ask(t, true)
	}
	// Callers that give up before the answer (a viewer's request ended)
	// leave the helper running, and the answers in step.
	for i := range 30 {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Duration(i)*100*time.Microsecond, cancel)
		_, _ = c.(shell.ShellEchoReporter).ShellInputEchoed(ctx, pid)
		cancel()
		ask(t, true)
	}
	// A program in the foreground: it takes the Ctrl-C, and a signal
	// reaches it.
	tm.send(t, "sleep 100\r")
	deadline := time.Now().Add(wait)
	for {
		sh, ready, err := c.(shell.ProgramReporter).InterruptReady(pid)
		if err != nil {
			t.Fatal(err)
		}
		if !sh && ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never held the terminal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ask(t, false)
	tm.send(t, "echo status=$?\r")
	if err := c.SignalForeground(t.Context(), pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	tm.waitFor(t, `status=143`)

	got, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(got, []byte("run\n")); n > 2 {
		t.Fatalf("the login's rc ran %d times for one shell and its questions, want at most 2 (the shell's login and the helper's)", n)
	}
}

// TestQuestionsWhileProgramsComeAndGo: the helper reads the /proc files
// of processes that may end while it reads them (the leader of the group
// that holds the terminal is often a program that lives a millisecond).
// Every question still gets its answer: a read cut short ends the answer
// (once, one such read looped for ever and every later question waited
// for its timeout).
func TestQuestionsWhileProgramsComeAndGo(t *testing.T) {
	t.Parallel()
	c, tm := startBash(t, options(testenv.SSHD(t)))
	tm.send(t, "echo PID=$$=\r")
	pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])
	tm.waitFor(t, `[$#] $`)
	tm.send(t, "while :; do /bin/true; done\r")
	pr := c.(shell.ProgramReporter)
	for i := range 300 {
		if _, _, err := pr.InterruptReady(pid); err != nil {
			t.Fatalf("question %d: %v", i, err)
		}
	}
}

// TestShellReplacedReadsTheCmdline: the shell's argv, read through the
// helper, tells tandem's bash (bash --rcfile /dev/fd/3 -i) from another,
// with arguments that hold newlines and backslashes kept whole.
func TestShellReplacedReadsTheCmdline(t *testing.T) {
	t.Parallel()
	srv := testenv.SSHD(t)
	for _, tc := range []struct {
		name, command string
		replaced      bool
	}{
		{"tandem's bash", "exec bash --rcfile /dev/fd/3 -i 3</dev/null", false},
		// Its words inside one argument, between newlines: not tandem's.
		{"look-alike argument", `exec -a $'bash\n--rcfile\n/dev/fd/3\n\\' bash --norc -i`, true},
		{"another bash", "exec bash --norc -i", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dial(t, options(srv), shell.Launch{Command: tc.command})
			if err != nil {
				t.Fatal(err)
			}
			tm := newTerm(t, c)
			tm.send(t, "echo PID=$$=\r")
			pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])
			r, err := c.(interface{ ShellReplaced(int) (bool, error) }).ShellReplaced(pid)
			if err != nil || r != tc.replaced {
				t.Fatalf("ShellReplaced = %v, %v; want %v", r, err, tc.replaced)
			}
		})
	}
}
