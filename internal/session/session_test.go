package session_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/local"
	"github.com/tandem-sh/tandem/internal/testenv"
)

var alice = session.Caller{Tenant: "t1", ID: "alice"}

// localTarget is a real bash in a real PTY; the sandbox is covered by the
// local package and the end-to-end tests.
func localTarget(t *testing.T) session.Target {
	return session.Target{Name: "local", Kind: "local", Dialer: &local.Options{Workspace: t.TempDir(), NoSandbox: true,
		Env: []string{"PATH=" + os.Getenv("PATH")}, RunDirParent: t.TempDir()}}
}

func create(t *testing.T, m *session.Manager, c session.Caller, name string) (*session.Session, string) {
	t.Helper()
	target := localTarget(t)
	s, tok, err := m.Create(context.Background(), c, name, target)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-registered first: end the shell before its
	// workspace and run dir parent are removed under it.
	t.Cleanup(m.Shutdown)
	return s, tok
}

func TestLeasesDestroyShellAndProcesses(t *testing.T) {
	tests := []struct {
		name   string
		opts   session.Options
		keepUp bool
		reason string
	}{
		{"idle", session.Options{IdleTimeout: 400 * time.Millisecond}, false, session.EndIdleTimeout},
		{"lifetime", session.Options{MaxLifetime: 900 * time.Millisecond, IdleTimeout: time.Hour}, true, session.EndMaxLifetime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var ended []string
			tc.opts.OnEnd = func(_ *session.Session, reason string) {
				mu.Lock()
				ended = append(ended, reason)
				mu.Unlock()
			}
			m := session.NewManager(&tc.opts)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go m.Run(ctx)
			s, tok := create(t, m, alice, "leased")
			rec, err := s.Exec(ctx, "sleep 1000 & echo $!", shell.ExecOptions{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(rec.Stdout.String()))
			if !testenv.Running(pid) {
				t.Fatalf("background pid %d not running", pid)
			}
			endings := func() int {
				mu.Lock()
				defer mu.Unlock()
				return len(ended)
			}
			// OnEnd runs after the shell is closed, a moment after the
			// session leaves the registry: wait for both.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) && (m.Count() > 0 || endings() == 0) {
				if tc.keepUp {
					_, _ = s.Exec(ctx, "true", shell.ExecOptions{Timeout: time.Second})
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			got := append([]string(nil), ended...)
			mu.Unlock()
			if m.Count() != 0 || len(got) != 1 || got[0] != tc.reason {
				t.Fatalf("after the lease: %d live, ended %v, want [%s]", m.Count(), got, tc.reason)
			}
			for i := 0; i < 50 && testenv.Running(pid); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if testenv.Running(pid) {
				t.Errorf("process %d outlived its session", pid)
			}
			var ee *session.EndedError
			if _, err := m.Lookup(alice, "leased", tok); !errors.As(err, &ee) || ee.Reason != tc.reason {
				t.Errorf("lookup after the lease: %v", err)
			}
		})
	}
}

func TestLookupRefusals(t *testing.T) {
	m := session.NewManager(nil)
	t.Cleanup(m.Shutdown)
	_, tok := create(t, m, alice, "mine")
	// The token with its last character changed (to one it is not).
	wrong := tok[:len(tok)-1] + "x"
	if tok[len(tok)-1] == 'x' {
		wrong = tok[:len(tok)-1] + "y"
	}
	tests := []struct {
		name   string
		caller session.Caller
		sess   string
		token  string
	}{
		{"no token", alice, "mine", ""},
		{"wrong token", alice, "mine", wrong},
		{"unknown name", alice, "nope", tok},
		{"other caller, right token", session.Caller{Tenant: "t1", ID: "bob"}, "mine", tok},
		{"other tenant, right token", session.Caller{Tenant: "t2", ID: "alice"}, "mine", tok},
	}
	for _, tc := range tests {
		if _, err := m.Lookup(tc.caller, tc.sess, tc.token); !errors.Is(err, session.ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", tc.name, err)
		}
	}
	if _, err := m.Lookup(alice, "mine", tok); err != nil {
		t.Errorf("owner with token: %v", err)
	}
	if got := m.List(session.Caller{Tenant: "t2", ID: "alice"}); len(got) != 0 {
		t.Errorf("another tenant sees %v", got)
	}
}

func TestGatePerSession(t *testing.T) {
	m := session.NewManager(nil)
	t.Cleanup(m.Shutdown)
	a, _ := create(t, m, alice, "a")
	b, _ := create(t, m, alice, "b")
	ctx := context.Background()
	if err := a.Input(ctx, []byte("echo human\r")); err != nil {
		t.Fatal(err)
	}
	var gate *session.GateError
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := b.Exec(ctx, "echo b", shell.ExecOptions{Timeout: 5 * time.Second}); err != nil {
			t.Fatalf("b is gated by a's activity: %v", err)
		}
		_, err := a.Exec(ctx, "echo a", shell.ExecOptions{Timeout: 5 * time.Second})
		if errors.As(err, &gate) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gate == nil || len(gate.Commands) != 1 || gate.Commands[0].Command != "echo human" {
		t.Fatalf("a's gate: %+v", gate)
	}
	if rec, err := a.Exec(ctx, "echo a", shell.ExecOptions{Timeout: 5 * time.Second}); err != nil || rec.Stdout.String() != "a\n" {
		t.Errorf("after the gate: %v %q", err, rec.Stdout)
	}
}

// TestRunningCommandIsNotIdle: a command that outlived its exec timeout
// keeps the session alive past the idle timeout; when it ends, the idle
// clock applies again.
func TestRunningCommandIsNotIdle(t *testing.T) {
	m := session.NewManager(&session.Options{IdleTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	s, _ := create(t, m, alice, "busy")
	var te *shell.TimeoutError
	if _, err := s.Exec(ctx, "sleep 1.5", shell.ExecOptions{Timeout: 100 * time.Millisecond}); !errors.As(err, &te) {
		t.Fatalf("want a timeout, got %v", err)
	}
	time.Sleep(1200 * time.Millisecond) // well past the idle timeout, sleep still running
	if m.Count() != 1 {
		t.Fatal("a session with a running command was reaped as idle")
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.Count() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m.Count() != 0 || s.EndReason() != session.EndIdleTimeout {
		t.Errorf("after the command ended: %d live, reason %q", m.Count(), s.EndReason())
	}
}

// replayJournal returns a recording path as a rewritten database row would.
type replayJournal struct {
	session.Journal
	path string
}

func (j replayJournal) Replay(ctx context.Context, keyHash [32]byte) (string, string, bool) {
	return "s", j.path, true
}

// TestReplayOnlyFromRecordings: a recording path from the database is
// served only if it names a recording in the recordings directory (issue 6
// item 1: a sandbox that rewrote replays.recording_path could make the
// replay page serve any file).
func TestReplayOnlyFromRecordings(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(dir, "0123456789abcdef.cast"), true},
		{"/etc/shadow", false},
		{filepath.Join(dir, "..", "x", "0123456789abcdef.cast"), false},
		{filepath.Join(dir, "notes.txt"), false},
	} {
		m := session.NewManager(&session.Options{RecordingsDir: dir, Journal: replayJournal{path: tc.path}})
		_, path, ok := m.Recording("key")
		if ok != tc.ok || (ok && path != tc.path) {
			t.Errorf("%s: ok %v path %q", tc.path, ok, path)
		}
		m.Shutdown()
	}
}

// TestInfoWhileCommandsEnd: listing a session while human commands end
// never deadlocks. Info held the session's lock while it asked the shell
// for its cwd, and the shell files a finished command into the session
// with its own lock held.
func TestInfoWhileCommandsEnd(t *testing.T) {
	m := session.NewManager(nil)
	s, _ := create(t, m, alice, "lister")
	if err := s.Input(context.Background(), []byte("for i in $(seq 400); do true; done\r"+strings.Repeat("true\r", 300))); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
			_ = s.Info()
			_ = m.List(alice)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Info did not return: deadlocked with the shell filing a command")
	}
}
