package shell_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// startKeys is start with the IDs of the agent's commands as they start.
func startKeys(t *testing.T, d shell.Dialer) (*harness, chan string) {
	t.Helper()
	h := &harness{}
	ids := make(chan string, 16)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sh, err := shell.Start(ctx, d, &shell.Options{
		OnStart: func(r shell.Record) {
			if r.Source == "agent" {
				ids <- r.ID
			}
		},
		OnCommand: func(r shell.Record) {
			h.mu.Lock()
			if r.Source == "user" {
				h.user = append(h.user, r)
			} else {
				h.agent = append(h.agent, r)
			}
			h.mu.Unlock()
		},
		Output: func(p []byte) {
			h.mu.Lock()
			h.screen.Write(p)
			h.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	h.sh = sh
	return h, ids
}

// TestAgentKeysNeverReachThePrompt: keys the agent sends to its command
// that the command leaves unread, and a line behind a signal key, never
// run at the shell's prompt, while every line the human types ahead
// during the same command runs, as theirs (issue 28: `Ctrl-C` + `touch
// pwn`, and type-ahead left by sleep, read and cat, ran at the prompt,
// filed as the human's).
func TestAgentKeysNeverReachThePrompt(t *testing.T) {
	tests := []struct {
		name, cmd, keys string
		refused         bool // a signal key: the input is refused whole
	}{
		{"ctrl-c", "sleep 0.2", "\x03touch pwn; echo ran\n", true},
		{"ctrl-z", "sleep 0.2", "\x1atouch pwn; echo ran\n", true},
		{`ctrl-\`, "sleep 0.2", "\x1ctouch pwn; echo ran\n", true},
		{"sleep", "sleep 0.2", "touch pwn\n", false},
		{"read", "read x", "a\nb\ntouch pwn\n", false},
		{"cat", "cat", "\x04touch pwn\n", false},
		{"partial", "sleep 0.2", "touch pwn", false},
	}
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, ids := startKeys(t, dial(t))
			dir := t.TempDir()
			h.exec(t, "cd "+dir)
			<-ids
			viewer := shell.WithViewer(context.Background(), "bob")
			humans := 0
			for round := range rounds {
				for _, tc := range tests {
					done := make(chan error, 1)
					go func() {
						_, err := h.sh.Exec(context.Background(), tc.cmd, shell.ExecOptions{Timeout: 15 * time.Second})
						done <- err
					}()
					id := <-ids
					_, err := h.sh.SendInput(context.Background(), id, []byte(tc.keys))
					switch {
					case tc.refused && !errors.Is(err, shell.ErrInvalidInput):
						t.Fatalf("%s round %d: SendInput = %v; want ErrInvalidInput", tc.name, round, err)
					case !tc.refused && err != nil && !errors.Is(err, shell.ErrNotRunning):
						t.Fatalf("%s round %d: SendInput = %v", tc.name, round, err)
					}
					// The human types a line ahead while the command runs.
					line := fmt.Sprintf("echo human-%s-%d", strings.Trim(tc.name, `\`), round)
					if err := h.sh.Input(viewer, []byte(line+"\r")); err != nil {
						t.Fatal(err)
					}
					if err := <-done; err != nil {
						t.Fatalf("%s round %d: exec: %v", tc.name, round, err)
					}
					humans++
					got := h.users(t, humans)
					last := got[len(got)-1]
					if _, err := os.Stat(filepath.Join(dir, "pwn")); err == nil {
						t.Fatalf("%s round %d: the agent's keys ran at the prompt: pwn exists; human commands %v", tc.name, round, commands(got))
					}
					for _, r := range got {
						if strings.Contains(r.Command, "pwn") || r.Unattributed {
							t.Fatalf("%s round %d: a human command %q (unattributed %v) holds the agent's keys", tc.name, round, r.Command, r.Unattributed)
						}
					}
					if last.Command != line || last.Viewer != "bob" {
						t.Fatalf("%s round %d: the human's type-ahead came back as %q by %q; want %q by bob (all: %v)", tc.name, round, last.Command, last.Viewer, line, commands(got))
					}
				}
			}
			if got := h.users(t, humans); len(got) != humans {
				t.Errorf("%d human commands; want %d: %v", len(got), humans, commands(got))
			}
			h.mu.Lock()
			screen := h.screen.String()
			h.mu.Unlock()
			if m := regexp.MustCompile(`\^\^[0-9a-f]{16}\^_`).FindString(screen); m != "" {
				t.Errorf("the viewers saw the drain token's echo %q", m)
			}
		})
	}
}

func commands(recs []shell.Record) []string {
	var c []string
	for _, r := range recs {
		c = append(c, r.Command)
	}
	return c
}

// TestKeysOfBothIntoOneCommand: the agent and the human type into the
// same command of the agent's. Where tandem can measure the terminal's
// queue (local), each waits only until the other's keys were read, and
// the command gets both in order. Where it cannot (SSH, the plain test
// PTY), the human's keys wait until the command ends, and the agent's are
// refused while the human's may be unread.
func TestKeysOfBothIntoOneCommand(t *testing.T) {
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, ids := startKeys(t, dial(t))
			h.exec(t, "true")
			<-ids
			measurable := name == "local"
			viewer := shell.WithViewer(context.Background(), "bob")
			// run starts the command and waits until it reads the terminal:
			// keys typed before then are read by the line editor, in raw
			// mode, and a read gets "\r" for Enter.
			run := func(phase string) chan shell.Record {
				done := make(chan shell.Record, 1)
				go func() {
					rec, _ := h.sh.Exec(context.Background(), "echo "+phase+`; read a; read b; echo "$a-$b"`, shell.ExecOptions{Timeout: 10 * time.Second})
					done <- rec
				}()
				h.waitScreen(t, phase+"\r\n")
				return done
			}

			// The agent first, then the human.
			done := run("phase1")
			id := <-ids
			if _, err := h.sh.SendInput(context.Background(), id, []byte("agent\n")); err != nil {
				t.Fatal(err)
			}
			if err := h.sh.Input(viewer, []byte("human\r")); err != nil {
				t.Fatal(err)
			}
			if measurable {
				if rec := <-done; rec.Stdout.String() != "phase1\nagent-human\n" {
					t.Errorf("agent, then human: stdout %q; want agent-human", rec.Stdout.String())
				}
			} else {
				// Held until the command ends: the human's line then
				// comes to the prompt, as typed ahead.
				if _, err := h.sh.Cancel(context.Background(), 0); err != nil {
					t.Fatal(err)
				}
				<-done
				if got := h.users(t, 1); got[0].Command != "human" || got[0].Viewer != "bob" {
					t.Errorf("the human's held line came back as %q by %q", got[0].Command, got[0].Viewer)
				}
			}
			h.idle(t)
			for len(ids) > 0 {
				<-ids
			}

			// The human first, then the agent.
			done = run("phase2")
			id = <-ids
			if err := h.sh.Input(viewer, []byte("human\r")); err != nil {
				t.Fatal(err)
			}
			_, err := h.sh.SendInput(context.Background(), id, []byte("agent\n"))
			var busy *shell.BusyError
			switch {
			case measurable && err != nil:
				t.Fatalf("human, then agent: %v", err)
			case measurable:
				if rec := <-done; rec.Stdout.String() != "phase2\nhuman-agent\n" {
					t.Errorf("human, then agent: stdout %q; want human-agent", rec.Stdout.String())
				}
			case !errors.As(err, &busy) || busy.Kind != shell.BusyHumanInput:
				t.Fatalf("human, then agent, unmeasurable queue: %v; want busy %s", err, shell.BusyHumanInput)
			default:
				if err := h.sh.Input(viewer, []byte("more\r")); err != nil {
					t.Fatal(err)
				}
				if rec := <-done; rec.Stdout.String() != "phase2\nhuman-more\n" {
					t.Errorf("human's two lines: stdout %q", rec.Stdout.String())
				}
			}
		})
	}
}

// TestHeldKeysOutliveALostIntegration: the agent types into a command
// that replaced the shell (exec) and has not read the keys yet, so no
// drain ever comes. Once tandem sees the integration is gone it discards
// the agent's keys, and the human's held behind them reach the program.
func TestHeldKeysOutliveALostIntegration(t *testing.T) {
	h, ids := startKeys(t, dialers(t)["local"](t))
	h.exec(t, "true")
	<-ids
	errc := make(chan error, 1)
	go func() {
		_, err := h.sh.Exec(context.Background(), `exec python3 -c 'import time; time.sleep(1.5); print(input().upper())'`, shell.ExecOptions{Timeout: time.Second})
		errc <- err
	}()
	id := <-ids
	if _, err := h.sh.SendInput(context.Background(), id, []byte("agent\n")); err != nil {
		t.Fatal(err)
	}
	if err := h.sh.Input(shell.WithViewer(context.Background(), "bob"), []byte("human\r")); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, shell.ErrIntegrationLost) {
		t.Fatalf("exec python3: %v; want ErrIntegrationLost", err)
	}
	h.waitScreen(t, "HUMAN")
}

// TestTypedWhileStagedIsKept: keys a human typed while the agent's line
// was being staged reach the terminal right behind it; the agent's keys
// then wait until they were read, or are refused, so the discard at the
// command's end never takes the human's line.
func TestTypedWhileStagedIsKept(t *testing.T) {
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // the test PTY cannot look at the shell's process
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, ids := startKeys(t, dial(t))
			h.exec(t, "true")
			<-ids
			for deadline := time.Now().Add(10 * time.Second); !h.sh.AtIdlePrompt(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("no idle prompt")
				}
			}
			pid := h.sh.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			done := make(chan error, 1)
			go func() {
				_, err := h.sh.Exec(context.Background(), "sleep 1.5", shell.ExecOptions{Timeout: 15 * time.Second})
				done <- err
			}()
			for deadline := time.Now().Add(10 * time.Second); !h.sh.Staging(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the agent's line was never staged")
				}
			}
			if err := h.sh.Input(shell.WithViewer(context.Background(), "bob"), []byte("echo early\r")); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			id := <-ids
			_, err := h.sh.SendInput(context.Background(), id, []byte("echo agent-typed\n"))
			var busy *shell.BusyError
			if !errors.As(err, &busy) || busy.Kind != shell.BusyHumanInput {
				t.Errorf("the agent's keys behind the human's unread line: %v; want busy %s", err, shell.BusyHumanInput)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := h.users(t, 1); got[0].Command != "echo early" || got[0].Viewer != "bob" {
				t.Errorf("the human's line came back as %q by %q", got[0].Command, got[0].Viewer)
			}
		})
	}
}

// TestHumanInterruptPassesHeldKeys: while the human's keys wait behind
// the agent's unread ones, the human's Ctrl-C still interrupts the
// command at once; what the human typed before it is dropped, as the
// terminal drops what a Ctrl-C finds unread, and nothing of the agent's
// runs at the prompt.
func TestHumanInterruptPassesHeldKeys(t *testing.T) {
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, ids := startKeys(t, dial(t))
			h.exec(t, "true")
			<-ids
			viewer := shell.WithViewer(context.Background(), "bob")
			done := make(chan shell.Record, 1)
			go func() {
				rec, _ := h.sh.Exec(context.Background(), "sleep 30", shell.ExecOptions{Timeout: 20 * time.Second})
				done <- rec
			}()
			id := <-ids
			if _, err := h.sh.SendInput(context.Background(), id, []byte("echo agent-$((1+1))\n")); err != nil {
				t.Fatal(err)
			}
			if err := h.sh.Input(viewer, []byte("echo held\r")); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := h.sh.Input(viewer, []byte{3}); err != nil {
				t.Fatal(err)
			}
			rec := <-done
			if rec.Interrupt == nil || rec.Interrupt.By != "human" || time.Since(start) > 10*time.Second {
				t.Fatalf("the human's Ctrl-C: exit %d, interrupt %+v after %v", rec.ExitCode, rec.Interrupt, time.Since(start))
			}
			h.idle(t)
			if err := h.sh.Input(viewer, []byte("echo after\r")); err != nil {
				t.Fatal(err)
			}
			if got := h.users(t, 1); len(got) != 1 || got[0].Command != "echo after" {
				t.Errorf("human commands %v; want only echo after", commands(got))
			}
		})
	}
}
