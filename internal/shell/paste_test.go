package shell_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// pasteLine is line i of a test paste: builtins and programs, some of them
// failing, so that every record's command and exit code can be checked.
func pasteLine(i int) (line string, exit int) {
	switch i % 5 {
	case 0:
		return fmt.Sprintf("/bin/echo p%d", i), 0
	case 1:
		return fmt.Sprintf("echo p%d", i), 0
	case 2:
		return fmt.Sprintf("(exit %d)", i%7), i % 7
	case 3:
		return fmt.Sprintf("sh -c 'echo p%d; exit 4'", i), 4
	}
	return fmt.Sprintf("/bin/false p%d", i), 1
}

// sendPaste types text the way the browser page sends a paste: in pieces
// of at most 8 KiB, one after another.
func sendPaste(t *testing.T, sh *shell.Shell, text string) {
	t.Helper()
	ctx := shell.WithViewer(context.Background(), "paster")
	for i := 0; i < len(text); i += 8192 {
		if err := sh.Input(ctx, []byte(text[i:min(len(text), i+8192)])); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPasteEveryCommandReported: a paste of hundreds or thousands of lines
// typed at once runs every line, and every line comes back as its own
// human command, in order, with its exact exit code and the viewer who
// typed it (issue 18: a 300-line paste reported 64 commands, and a 20-line
// paste of programs lost some). The shell is idle afterwards.
func TestPasteEveryCommandReported(t *testing.T) {
	sizes := map[string][]int{"pty": {300, 2000}, "local": {300}, "ssh": {300}} // 2,000 locally and over SSH: cmd/tandem's paste tests
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, n := range sizes[name] {
				h := start(t, dial(t))
				var b strings.Builder
				for i := range n {
					line, _ := pasteLine(i)
					b.WriteString(line + "\r")
				}
				sendPaste(t, h.sh, b.String())
				got := h.usersWithin(t, n, time.Duration(n)*20*time.Millisecond+20*time.Second)
				if len(got) != n {
					t.Fatalf("%d lines: %d human commands", n, len(got))
				}
				for i, r := range got {
					line, exit := pasteLine(i)
					if r.Command != line || !r.ExitKnown || r.ExitCode != exit || r.Viewer != "paster" || r.Unattributed {
						t.Fatalf("%d lines: command %d is %q exit %d (known %v) by %q unattributed %v; want %q exit %d by paster",
							n, i, r.Command, r.ExitCode, r.ExitKnown, r.Viewer, r.Unattributed, line, exit)
					}
				}
				h.idle(t)
			}
		})
	}
}

// TestMultiLineInputShapes: input that spans lines comes back as the
// commands bash ran, and leaves the prompt idle for the agent at once: a
// bracketed paste (one command carrying every line and its output), a
// here-document and a continued line typed by hand, and lines typed ahead
// while the agent's command runs (issue 18: the first two left the
// session busy until the human typed again).
func TestMultiLineInputShapes(t *testing.T) {
	type want struct {
		command string
		exit    int
		out     []string // each must be in the output
	}
	tests := []struct {
		name  string
		keys  []string
		agent string // run by the agent while the keys are typed
		want  []want
	}{
		{name: "bracketed paste", keys: []string{"\x1b[200~echo one\recho two\r(exit 3)\recho four\x1b[201~", "\r"},
			want: []want{{"echo one\necho two\n(exit 3)\necho four", 0, []string{"one", "two", "four"}}}},
		{name: "bracketed paste in pieces", keys: []string{"\x1b[20", "0~echo p1\r", "echo p2\x1b[2", "01~\r"},
			want: []want{{"echo p1\necho p2", 0, []string{"p1", "p2"}}}},
		{name: "here-document", keys: []string{"cat <<EOF\r", "x\r", "y\r", "EOF\r"},
			want: []want{{"cat <<EOF\nx\ny\nEOF", 0, []string{"x\ny"}}}},
		{name: "here-document at once", keys: []string{"cat <<EOF\rx\rEOF\recho after\r"},
			want: []want{{"cat <<EOF\nx\nEOF", 0, []string{"x"}}, {"echo after", 0, []string{"after"}}}},
		{name: "continued line", keys: []string{"echo a \\\r", "b\r"},
			want: []want{{"echo a \\\nb", 0, []string{"a b"}}}}, // as typed
		{name: "open quote", keys: []string{"echo 'q\r", "r'\r"},
			want: []want{{"echo 'q\nr'", 0, []string{"q\nr"}}}},
		{name: "type-ahead during the agent's command", agent: "sleep 0.5; echo agent",
			keys: []string{"echo t1\r", "false\r"},
			want: []want{{"echo t1", 0, []string{"t1"}}, {"false", 1, nil}}},
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			ctx := shell.WithViewer(context.Background(), "typist")
			seen := 0
			for _, tc := range tests {
				agentDone := make(chan error, 1)
				if tc.agent != "" {
					go func() {
						_, err := h.sh.Exec(ctx, tc.agent, shell.ExecOptions{Timeout: 20 * time.Second})
						agentDone <- err
					}()
					h.waitScreen(t, tc.agent)
				}
				for _, k := range tc.keys {
					if err := h.sh.Input(ctx, []byte(k)); err != nil {
						t.Fatal(err)
					}
					time.Sleep(20 * time.Millisecond) // a person's pace between lines
				}
				if tc.agent != "" {
					if err := <-agentDone; err != nil {
						t.Fatalf("%s: agent: %v", tc.name, err)
					}
				}
				got := h.users(t, seen+len(tc.want))[seen:]
				seen += len(tc.want)
				for i, w := range tc.want {
					r := got[i]
					if r.Command != w.command || r.ExitCode != w.exit || r.Viewer != "typist" {
						t.Errorf("%s: command %d is %q exit %d by %q; want %q exit %d", tc.name, i, r.Command, r.ExitCode, r.Viewer, w.command, w.exit)
					}
					for _, o := range w.out {
						if !strings.Contains(r.Stdout.String(), o) {
							t.Errorf("%s: command %d output %q lacks %q", tc.name, i, r.Stdout.String(), o)
						}
					}
				}
				// The prompt is idle for the agent: no busy, no human type again.
				rec, err := h.sh.Exec(ctx, "echo idle", shell.ExecOptions{Timeout: 10 * time.Second})
				if err != nil || rec.Stdout.String() != "idle\n" {
					t.Fatalf("%s: the next agent command: %v %q", tc.name, err, rec.Stdout.String())
				}
				if n := h.userCount(); n != seen {
					t.Fatalf("%s: %d human commands, want %d", tc.name, n, seen)
				}
			}
		})
	}
}

// TestHumanInterruptsTheAgent: a viewer's Ctrl-C on the agent's command,
// typed at any moment from the staging of its line on, interrupts the
// command and says who pressed it. (A Ctrl-C that reached the terminal
// right behind the accept key aborted the line unseen and dropped the
// key, leaving the call waiting for ever; one in the gap before the
// program ran reached only bash.)
func TestHumanInterruptsTheAgent(t *testing.T) {
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			ctx := shell.WithViewer(context.Background(), "bob")
			for round := range 10 {
				done := make(chan shell.Record, 1)
				errc := make(chan error, 1)
				go func() {
					rec, err := h.sh.Exec(ctx, "echo started; sleep 30", shell.ExecOptions{Timeout: 15 * time.Second})
					done <- rec
					errc <- err
				}()
				// The moment the viewers see the line (while it is staged),
				// or a little later.
				wctx, cancel := context.WithCancel(ctx)
				seen := ""
				_ = h.sh.Watch(wctx, func(p []byte) error {
					if seen += string(p); strings.Count(seen, "echo started; sleep 30") > round {
						cancel()
					}
					return nil
				})
				time.Sleep(time.Duration(round%4) * 3 * time.Millisecond)
				if err := h.sh.Input(ctx, []byte{3}); err != nil {
					t.Fatal(err)
				}
				rec, err := <-done, <-errc
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if rec.ExitCode != 130 || rec.Interrupt == nil || rec.Interrupt.By != "human" || rec.Interrupt.Key != "Ctrl-C" || rec.Interrupt.Viewer != "bob" {
					t.Fatalf("round %d: exit %d, interrupt %+v", round, rec.ExitCode, rec.Interrupt)
				}
			}
			h.idle(t)
		})
	}
}

// TestTypedAheadOutlivesAStalledShell: lines typed ahead while the shell
// cannot read them (stopped here; starved of CPU in CI) still run first
// and each comes back as the human's command, even once their Enters look
// stale to the agent's call. They used to be dropped: the agent's line
// went in behind them, their commands ran unreported, and a long paste
// made the agent's call fail as shell_unresponsive.
func TestTypedAheadOutlivesAStalledShell(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			h.exec(t, "true")
			for deadline := time.Now().Add(10 * time.Second); !h.sh.AtIdlePrompt(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no idle prompt after the agent's command")
				}
			}
			pid := h.sh.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			sendPaste(t, h.sh, "echo h1\recho h2\recho h3\r")
			type result struct {
				rec shell.Record
				err error
			}
			done := make(chan result, 1)
			go func() {
				rec, err := h.sh.Exec(context.Background(), "echo agent", shell.ExecOptions{Timeout: 20 * time.Second})
				done <- result{rec, err}
			}()
			// The call goes ahead once the Enters look stale (a second).
			for deadline := time.Now().Add(10 * time.Second); !h.sh.Staging(); time.Sleep(5 * time.Millisecond) {
				select {
				case r := <-done:
					t.Fatalf("the agent's call ended before its line was staged: %+v, %v", r.rec, r.err)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("the agent's line was never staged")
				}
			}
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			r := <-done
			var busy *shell.BusyError
			if !errors.As(r.err, &busy) || busy.Kind != shell.BusyHuman {
				t.Errorf("the agent's call, behind three typed-ahead lines: %+v, %v; want busy with the human's command", r.rec, r.err)
			}
			got := h.users(t, 3)
			for i, rec := range got {
				want := fmt.Sprintf("echo h%d", i+1)
				if rec.Command != want || rec.Viewer != "paster" || rec.Unattributed || rec.Stdout.String() != fmt.Sprintf("h%d\n", i+1) {
					t.Errorf("human command %d: %q by %q (unattributed %v) printed %q; want %q by paster", i, rec.Command, rec.Viewer, rec.Unattributed, rec.Stdout.String(), want)
				}
			}
			if rec := h.exec(t, "echo agent"); rec.Stdout.String() != "agent\n" {
				t.Errorf("the agent's next call printed %q", rec.Stdout.String())
			}
			if n := len(h.users(t, 3)); n != 3 {
				t.Errorf("%d human commands; want 3", n)
			}
		})
	}
}
