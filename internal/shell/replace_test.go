package shell_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestHumanExecIsFollowed: a human's command that replaces the shell
// (exec bash) ends at once, status unknown, and every agent call from
// then on answers ErrIntegrationLost naming it, never busy for the
// lifetime of the new shell; the human keeps the terminal until they
// leave it. A line that execs without naming exec (eval) is found when an
// agent call finds it running.
func TestHumanExecIsFollowed(t *testing.T) {
	tests := []struct {
		name, line, program string
	}{
		{"bash", "exec bash", "bash"},
		{"sh", "exec sh", "sh"},
		{"hidden", `eval "ex""ec bash"`, "bash"},
	}
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := start(t, dial(t))
				viewer := shell.WithViewer(context.Background(), "bob")
				typed := time.Now()
				if err := h.sh.Input(viewer, []byte(tc.line+"\r")); err != nil {
					t.Fatal(err)
				}
				// Every agent call is lost (never busy) from 2 s after the
				// exec on, and so is a cancel.
				var err error
				for {
					_, err = h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second})
					var busy *shell.BusyError
					if !errors.As(err, &busy) || time.Since(typed) > 2*time.Second {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if !errors.Is(err, shell.ErrIntegrationLost) || !strings.Contains(err.Error(), tc.line) || !strings.Contains(err.Error(), "with "+tc.program) {
					t.Fatalf("agent call %v after the human's %q: %v, want ErrIntegrationLost naming it", time.Since(typed), tc.line, err)
				}
				if _, err := h.sh.Cancel(context.Background(), 0); !errors.Is(err, shell.ErrIntegrationLost) {
					t.Fatalf("cancel: %v, want ErrIntegrationLost", err)
				}
				users := h.usersWithin(t, 1, 2*time.Second)
				if users[0].Command != tc.line || users[0].ExitKnown || users[0].Viewer != "bob" {
					t.Errorf("the human's exec as reported: %+v", users[0])
				}
				// The human works on in the new shell, then leaves it.
				for _, c := range []string{"echo one-$((1+1))", "cd /", "echo three-$((1+2))"} {
					if err := h.sh.Input(viewer, []byte(c+"\r")); err != nil {
						t.Fatal(err)
					}
					start := time.Now()
					if _, err := h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second}); !errors.Is(err, shell.ErrIntegrationLost) || time.Since(start) > time.Second {
						t.Fatalf("agent call after the human's %q in the new shell: %v in %v", c, err, time.Since(start))
					}
				}
				h.waitScreen(t, "three-3")
				if err := h.sh.Input(viewer, []byte("exit\r")); err != nil {
					t.Fatal(err)
				}
				select {
				case <-h.sh.Drained():
				case <-time.After(10 * time.Second):
					t.Fatal("the session's shell did not end when the human left the new shell")
				}
				if !h.sh.EndedByHuman() {
					t.Error("the human's exit from the new shell is not counted as the human's")
				}
				if n := h.userCount(); n != 1 {
					t.Errorf("%d human commands reported, want the exec only", n)
				}
			})
		}
	}
}

// TestAgentExecAnswersAtOnce: the agent's own exec bash answers
// ErrIntegrationLost within 2 s, not at its timeout, and so do the calls
// after it, each at once.
func TestAgentExecAnswersAtOnce(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			begin := time.Now()
			_, err := h.sh.Exec(context.Background(), "exec bash", shell.ExecOptions{Timeout: 30 * time.Second})
			if !errors.Is(err, shell.ErrIntegrationLost) || !strings.Contains(err.Error(), "with bash") {
				t.Fatalf("exec bash: %v, want ErrIntegrationLost naming bash", err)
			}
			if d := time.Since(begin); d > 2*time.Second {
				t.Errorf("exec bash answered after %v, want within 2 s", d)
			}
			for i := range 3 {
				begin := time.Now()
				if _, err := h.sh.Exec(context.Background(), "echo again", shell.ExecOptions{Timeout: 30 * time.Second}); !errors.Is(err, shell.ErrIntegrationLost) {
					t.Fatalf("call %d after: %v, want ErrIntegrationLost", i, err)
				}
				if d := time.Since(begin); d > 500*time.Millisecond {
					t.Errorf("call %d after exec bash took %v", i, d)
				}
			}
		})
	}
}

// TestHumanNestedShell: a human's command that starts a shell of its own
// (bash, su) holds the session's shell until they leave it; agent calls
// meanwhile answer ErrNestedShell naming it, never busy, and once the
// human leaves it the command is reported with its status and the agent
// runs again.
func TestHumanNestedShell(t *testing.T) {
	tests := []struct {
		name, line, what string
	}{
		{"bash", "bash --norc", "bash"},
		{"su", "su", "su"},
	}
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				h := start(t, dial(t))
				viewer := shell.WithViewer(context.Background(), "bob")
				typed := time.Now()
				if err := h.sh.Input(viewer, []byte(tc.line+"\r")); err != nil {
					t.Fatal(err)
				}
				var err error
				for {
					_, err = h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second})
					var busy *shell.BusyError
					if !errors.As(err, &busy) || time.Since(typed) > 2*time.Second {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if !errors.Is(err, shell.ErrNestedShell) || !errors.Is(err, shell.ErrIntegrationLost) || !strings.Contains(err.Error(), "`"+tc.line+"` runs "+tc.what+",") {
					t.Fatalf("agent call %v after the human's %q: %v, want ErrNestedShell naming it", time.Since(typed), tc.line, err)
				}
				if _, err := h.sh.Cancel(context.Background(), 0); !errors.Is(err, shell.ErrNestedShell) {
					t.Fatalf("cancel: %v, want ErrNestedShell", err)
				}
				if err := h.sh.Input(viewer, []byte("echo inner-$((2+2))\r")); err != nil {
					t.Fatal(err)
				}
				h.waitScreen(t, "inner-4")
				if _, err := h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second}); !errors.Is(err, shell.ErrNestedShell) {
					t.Fatalf("agent call while the human works in the inner shell: %v", err)
				}
				if err := h.sh.Input(viewer, []byte("exit 3\r")); err != nil {
					t.Fatal(err)
				}
				users := h.users(t, 1)
				if users[0].Command != tc.line || !users[0].ExitKnown || users[0].ExitCode != 3 {
					t.Errorf("the human's %q as reported: %+v", tc.line, users[0])
				}
				h.idle(t)
				if rec := h.exec(t, "echo back"); rec.Stdout.String() != "back\n" {
					t.Errorf("after the inner shell: %q", rec.Stdout.String())
				}
			})
		}
	}
}

// TestHumanCommandStaysBusy: a human's command that is no shell of its
// own, a subshell or a shell running a command included, is busy while
// it runs, never taken for one (a fork of the shell shows the shell's own
// command line until it runs its program).
func TestHumanCommandStaysBusy(t *testing.T) {
	lines := []string{"(sleep 1.5; echo sub-done)", "bash -c 'sleep 1.5'", "sleep 1.5"}
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		for _, line := range lines {
			t.Run(name+"/"+line, func(t *testing.T) {
				t.Parallel()
				h := start(t, dial(t))
				if err := h.sh.Input(shell.WithViewer(context.Background(), "bob"), []byte(line+"\r")); err != nil {
					t.Fatal(err)
				}
				busy := 0
				for begin := time.Now(); time.Since(begin) < time.Second; time.Sleep(10 * time.Millisecond) {
					_, err := h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second})
					var b *shell.BusyError
					switch {
					case errors.As(err, &b):
						busy++
					case err != nil:
						t.Fatalf("agent call while the human's %q runs: %v, want busy", line, err)
					}
				}
				if busy == 0 {
					t.Fatalf("no call found the human's %q running", line)
				}
			})
		}
	}
}

// TestAgentLateExec: the agent's command that replaces the shell after
// its call returned (and whose line does not name exec) is found by the
// next call, which answers ErrIntegrationLost, not busy.
func TestAgentLateExec(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			_, err := h.sh.Exec(context.Background(), `sleep 0.5; eval "ex""ec bash"`, shell.ExecOptions{Timeout: 100 * time.Millisecond})
			var te *shell.TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("first call: %v, want a timeout", err)
			}
			for begin := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				_, err = h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 5 * time.Second})
				var busy *shell.BusyError
				if !errors.As(err, &busy) || time.Since(begin) > 2*time.Second {
					break
				}
			}
			if !errors.Is(err, shell.ErrIntegrationLost) || !strings.Contains(err.Error(), "with bash") {
				t.Fatalf("a call after the exec: %v, want ErrIntegrationLost", err)
			}
		})
	}
}

// TestHumanExitIsNoExec: a human's exit ends the shell with its status
// reported, never taken for an exec (the exited shell, not yet reaped,
// has an empty command line).
func TestHumanExitIsNoExec(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			if err := h.sh.Input(shell.WithViewer(context.Background(), "bob"), []byte("sleep 0.3; exit 3\r")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.sh.Drained():
			case <-time.After(10 * time.Second):
				t.Fatal("the shell did not end")
			}
			users := h.users(t, 1)
			if u := users[0]; u.Command != "sleep 0.3; exit 3" || !u.ExitKnown || u.ExitCode != 3 {
				t.Errorf("the human's exit as reported: %+v", u)
			}
			if !h.sh.EndedByHuman() {
				t.Error("the human's exit is not counted as the human's")
			}
		})
	}
}
