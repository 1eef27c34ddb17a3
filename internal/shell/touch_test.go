package shell_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestTouchesOfTheAgentsCommand: every piece of a viewer's input that
// reaches the agent's running command is told to OnTouch, with the
// command's id, the viewer, the key and Enter counts (never the keys),
// whether the terminal hid them, and the interrupt key; input at the
// prompt, before and after, is the human's own and is not (issue 29 item
// 1).
func TestTouchesOfTheAgentsCommand(t *testing.T) {
	type step struct {
		cmd, waitFor, keys, stdout string
		want                       shell.Touch // CommandID and At are checked apart
	}
	steps := []step{
		{`read -r -p 'Deploy? ' a; echo "a=$a"`, "Deploy? ", "yes\r", "a=yes\n",
			shell.Touch{Viewer: "bob", Keys: 4, Enters: 1}},
		{`read -rs -p 'PIN: ' p; echo "p=${#p}"`, "PIN: ", "4711\r", "p=4\n",
			shell.Touch{Viewer: "bob", Keys: 5, Enters: 1, Masked: true}},
		{`printf 'go\n'; sleep 30`, "go", "\x03", "go\n",
			shell.Touch{Viewer: "bob", Keys: 1, Interrupt: "Ctrl-C"}},
	}
	for name, dial := range dialers(t) {
		if name == "pty" {
			continue // it cannot tell whether the terminal echoes: every key is masked
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var touches []shell.Touch
			h, ids := startTouched(t, dial(t), func(tc shell.Touch) {
				mu.Lock()
				touches = append(touches, tc)
				mu.Unlock()
			})
			viewer := shell.WithViewer(context.Background(), "bob")
			taken := func() []shell.Touch {
				mu.Lock()
				defer mu.Unlock()
				got := touches
				touches = nil
				return got
			}
			human := 0
			typeLine := func(line string) {
				t.Helper()
				if err := h.sh.Input(viewer, []byte(line+"\r")); err != nil {
					t.Fatal(err)
				}
				human++
				h.users(t, human)
				h.idle(t)
				<-ids // idle's own command
			}
			typeLine("echo before")
			for _, st := range steps {
				done := make(chan shell.Record, 1)
				go func() {
					rec, err := h.sh.Exec(context.Background(), st.cmd, shell.ExecOptions{Timeout: 20 * time.Second})
					if err != nil {
						t.Errorf("%s: %v", st.cmd, err)
					}
					done <- rec
				}()
				id := <-ids
				h.waitScreenN(t, st.waitFor, 2) // the command line's echo, then its prompt
				before := time.Now()
				if err := h.sh.Input(viewer, []byte(st.keys)); err != nil {
					t.Fatal(err)
				}
				rec := <-done
				if rec.Stdout.String() != st.stdout {
					t.Errorf("%s: stdout %q", st.cmd, rec.Stdout.String())
				}
				got := taken()
				if len(got) != 1 {
					t.Fatalf("%s: touches %+v, want one", st.cmd, got)
				}
				g := got[0]
				if g.CommandID != id || g.Command != st.cmd || g.At.Before(before) {
					t.Errorf("%s: touch of %s (%q) at %v, want %s after %v", st.cmd, g.CommandID, g.Command, g.At, id, before)
				}
				g.CommandID, g.Command, g.At = "", "", time.Time{}
				if g != st.want {
					t.Errorf("%s: touch %+v, want %+v", st.cmd, g, st.want)
				}
				if st.want.Interrupt != "" && (rec.Interrupt == nil || rec.Interrupt.By != "human" || rec.Interrupt.Viewer != "bob") {
					t.Errorf("%s: the record's interrupt is %+v", st.cmd, rec.Interrupt)
				}
			}
			typeLine("echo after")
			if got := taken(); len(got) != 0 {
				t.Errorf("input at the prompt told as a touch: %+v", got)
			}
		})
	}
}

// startTouched is start with the IDs of the agent's commands as they
// start, and every touch told to onTouch.
func startTouched(t *testing.T, d shell.Dialer, onTouch func(shell.Touch)) (*harness, chan string) {
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
			}
			h.mu.Unlock()
		},
		Output: func(p []byte) {
			h.mu.Lock()
			h.screen.Write(p)
			h.mu.Unlock()
		},
		OnTouch: onTouch,
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	h.sh = sh
	return h, ids
}

// waitScreenN waits until the terminal has shown s at least n times.
func (h *harness) waitScreenN(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		ok := strings.Count(h.screen.String(), s) >= n
		h.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the terminal never showed %q %d times", s, n)
}
