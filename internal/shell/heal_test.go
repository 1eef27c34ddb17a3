package shell_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// afterBreak runs ten agent commands and checks each one's exact result.
func afterBreak(t *testing.T, h *harness, name string) {
	t.Helper()
	for i := range 10 {
		cmd := fmt.Sprintf("echo out%d; echo err%d >&2; (exit %d)", i, i, i)
		rec, err := h.sh.Exec(context.Background(), cmd, shell.ExecOptions{Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: command %d after: %v", name, i, err)
		}
		if rec.Stdout.String() != fmt.Sprintf("out%d\n", i) || rec.Stderr.String() != fmt.Sprintf("err%d\n", i) || rec.ExitCode != i || !rec.ExitKnown {
			t.Fatalf("%s: command %d after: %q %q %d (known %v)", name, i, rec.Stdout.String(), rec.Stderr.String(), rec.ExitCode, rec.ExitKnown)
		}
	}
}

// TestShellHeals: commands that break what tandem's integration relies on
// (its PROMPT_COMMAND hook, shell options, the prompt) are noticed and
// repaired before the next command: the breaking command itself comes
// back whole, with its output and status and what was repaired, and ten
// commands after it come back exact; typed by the agent or by a human
// (issue 18: unset PROMPT_COMMAND broke the session for good, and
// set +o emacs answered internal_error).
func TestShellHeals(t *testing.T) {
	tests := []struct {
		name, cmd string
		out       string
		exit      int
		repaired  []string
	}{
		{"unset PROMPT_COMMAND", "unset PROMPT_COMMAND; echo printed", "printed\n", 0, []string{"prompt_command"}},
		{"PROMPT_COMMAND array", "PROMPT_COMMAND=(true); echo arr; (exit 4)", "arr\n", 4, []string{"prompt_command"}},
		{"PROMPT_COMMAND string", "PROMPT_COMMAND='true'; echo str", "str\n", 0, []string{"prompt_command"}},
		{"direnv-style hook", `_hook() { :; }; PROMPT_COMMAND="_hook;${PROMPT_COMMAND}"; echo direnv`, "direnv\n", 0, nil},
		{"trap - DEBUG", "trap 'true' DEBUG; trap - DEBUG; echo trap", "trap\n", 0, nil},
		{"set +o history", "set +o history; echo hist", "hist\n", 0, []string{"history"}},
		{"set +o emacs", "set +o emacs; echo emacs", "emacs\n", 0, []string{"emacs"}},
		{"set +o history +o emacs +o monitor", "set +o history +o emacs +o monitor; echo three", "three\n", 0, []string{"history", "emacs", "monitor"}},
		{"vi mode", "set -o vi; echo vi", "vi\n", 0, nil},
		{"set -H", "set -H; echo histexp", "histexp\n", 0, []string{"histexpand"}},
		{"interactive_comments off", "shopt -u interactive_comments; echo cmt", "cmt\n", 0, []string{"interactive_comments"}},
		{"history expansion is off", "echo a!echo b!!", "a!echo b!!\n", 0, nil},
		{"sourced script resets the prompt", `f=$(mktemp); printf 'PS1="$ "\nPROMPT_COMMAND=\n' > "$f"; . "$f"; rm -f "$f"; echo sourced`, "sourced\n", 0, []string{"prompt_command"}},
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range tests {
				for _, who := range []string{"agent", "human"} {
					h := start(t, dial(t))
					label := tc.name + " (" + who + ")"
					if who == "agent" {
						rec, err := h.sh.Exec(context.Background(), tc.cmd, shell.ExecOptions{Timeout: 10 * time.Second})
						if err != nil {
							t.Fatalf("%s: %v", label, err)
						}
						if rec.Stdout.String() != tc.out || rec.ExitCode != tc.exit || !rec.ExitKnown || !slices.Equal(rec.Repaired, tc.repaired) {
							t.Errorf("%s: %q exit %d (known %v) repaired %v; want %q exit %d repaired %v",
								label, rec.Stdout.String(), rec.ExitCode, rec.ExitKnown, rec.Repaired, tc.out, tc.exit, tc.repaired)
						}
					} else {
						if err := h.sh.Input(context.Background(), []byte(tc.cmd+"\r")); err != nil {
							t.Fatal(err)
						}
						u := h.users(t, 1)[0]
						if !strings.Contains(u.Stdout.String(), strings.TrimSuffix(tc.out, "\n")) || u.ExitCode != tc.exit || !u.ExitKnown {
							t.Errorf("%s: %q exit %d (known %v); want %q exit %d", label, u.Stdout.String(), u.ExitCode, u.ExitKnown, tc.out, tc.exit)
						}
					}
					afterBreak(t, h, label)
				}
			}
		})
	}
}

// TestExecBashIsReported: a command that replaces the shell (exec bash)
// takes tandem's integration with it; the agent is told so, clearly, and
// every later command gets the same answer instead of a session that is
// busy for good.
func TestExecBashIsReported(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			_, err := h.sh.Exec(context.Background(), "exec bash --norc", shell.ExecOptions{Timeout: 2 * time.Second})
			var timeout *shell.TimeoutError
			if errors.As(err, &timeout) {
				// Without a way to look at the process (SSH), the cancel
				// finds no program of the command holding the terminal.
				_, err = h.sh.Cancel(context.Background(), 500*time.Millisecond)
			}
			if !errors.Is(err, shell.ErrIntegrationLost) {
				t.Fatalf("exec bash: %v, want ErrIntegrationLost", err)
			}
			if _, err := h.sh.Exec(context.Background(), "echo again", shell.ExecOptions{Timeout: 5 * time.Second}); !errors.Is(err, shell.ErrIntegrationLost) {
				t.Fatalf("the next command: %v, want ErrIntegrationLost", err)
			}
		})
	}
}

// TestStoppedShellIsUnresponsive: a shell stopped with SIGSTOP answers a
// code of its own that says so (it answered internal_error), and works
// again once continued.
func TestStoppedShellIsUnresponsive(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			pid := h.sh.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			_, err := h.sh.Exec(context.Background(), "echo never", shell.ExecOptions{Timeout: 20 * time.Second})
			if !errors.Is(err, shell.ErrUnresponsive) || !strings.Contains(err.Error(), fmt.Sprintf("kill -CONT %d", pid)) {
				t.Fatalf("stopped shell: %v", err)
			}
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			h.idle(t)
			afterBreak(t, h, "SIGCONT")
		})
	}
}
