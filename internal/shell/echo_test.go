package shell_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/local"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestNoEchoKeysNotRecorded: on both backends, what a human types while the
// terminal hides it (read -s, a program that turned echo off itself) never
// reaches the recording's input, while the command lines do; the agent's
// keys sent with SendInput are reported as echoed at a plain read (and
// recorded), hidden at read -s (and not recorded). Over SSH the mode comes
// from the server's stty, read as the keys are written.
func TestNoEchoKeysNotRecorded(t *testing.T) {
	backends := map[string]func(t *testing.T) shell.Dialer{
		"local": func(t *testing.T) shell.Dialer { return &local.Options{NoSandbox: true, Workspace: t.TempDir()} },
		"ssh": func(t *testing.T) shell.Dialer {
			srv := testenv.SSHD(t)
			return &sshconn.Options{Host: srv.Host, Port: srv.Port, User: srv.User,
				KeyFile: srv.ClientKeyFile, KnownHostsFile: srv.KnownHostsFile}
		},
	}
	for name, dialer := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var (
				mu     sync.Mutex
				typed  bytes.Buffer
				screen bytes.Buffer
			)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sh, err := shell.Start(ctx, dialer(t), &shell.Options{
				Output: func(p []byte) { mu.Lock(); screen.Write(p); mu.Unlock() },
				Input:  func(p []byte) { mu.Lock(); typed.Write(p); mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sh.Close() })
			// waitScreen waits until the terminal shows s; at the end of
			// what it shows, with last set (a prompt, not the line that
			// prints it).
			waitScreen := func(t *testing.T, s string, last bool) {
				t.Helper()
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
					mu.Lock()
					shown := screen.String()
					mu.Unlock()
					if last && strings.HasSuffix(shown, s) || !last && strings.Contains(shown, s) {
						return
					}
				}
				t.Fatalf("the terminal never showed %q", s)
			}
			recorded := func() string { mu.Lock(); defer mu.Unlock(); return typed.String() }

			// The human, at prompts that hide what they type.
			for i, line := range []string{
				`read -rs -p 'Password: ' pw; echo; echo "got1-${#pw}"`,
				`stty -echo; printf 'Code: '; read -r pw; stty echo; echo; echo "got2-${#pw}"`,
			} {
				secret := "pw-" + rand.Text()
				if err := sh.Input(ctx, []byte(line+"\r")); err != nil {
					t.Fatal(err)
				}
				waitScreen(t, []string{"Password: ", "Code: "}[i], true)
				if err := sh.Input(ctx, []byte(secret+"\r")); err != nil {
					t.Fatal(err)
				}
				waitScreen(t, []string{"got1-", "got2-"}[i]+"29", false)
				if rec := recorded(); strings.Contains(rec, secret) || !strings.Contains(rec, line) {
					t.Fatalf("recorded input %q: want the command line, not the secret %s", rec, secret)
				}
			}

			// The agent, at a prompt that echoes and at one that does not.
			for _, tc := range []struct {
				line, prompt, keys, done string
				echo                     int
			}{
				{`read -r -p 'Name: ' n; echo "name=$n"`, "Name: ", "agent-bob\r", "name=agent-bob", shell.EchoOn},
				{`read -rs -p 'PIN: ' n; echo; echo "pin=${#n}"`, "PIN: ", "agent-pin-4321\r", "pin=14", shell.EchoOff},
			} {
				_, err := sh.Exec(ctx, tc.line, shell.ExecOptions{Timeout: 500 * time.Millisecond})
				for busy := (*shell.BusyError)(nil); errors.As(err, &busy) && ctx.Err() == nil; {
					time.Sleep(10 * time.Millisecond) // the last command's end is still on its way
					_, err = sh.Exec(ctx, tc.line, shell.ExecOptions{Timeout: 500 * time.Millisecond})
				}
				var te *shell.TimeoutError
				if !errors.As(err, &te) {
					t.Fatalf("exec %q: %v, want it still running", tc.line, err)
				}
				waitScreen(t, tc.prompt, true)
				echo, err := sh.SendInput(ctx, te.Partial.ID, []byte(tc.keys))
				if err != nil || echo != tc.echo {
					t.Fatalf("SendInput at %q = %d, %v; want %d", tc.prompt, echo, err, tc.echo)
				}
				waitScreen(t, tc.done, false)
				if got := strings.Contains(recorded(), tc.keys); got != (tc.echo == shell.EchoOn) {
					t.Fatalf("agent keys %q recorded: %v; recorded input %q", tc.keys, got, recorded())
				}
			}
		})
	}
}
