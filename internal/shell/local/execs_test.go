package local

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestDialJudgesExecs: a sandboxed shell dialled with a judge has every
// program judged, the shell's own start included; a refused rm fails with
// "Operation not permitted", and a job in the terminal's foreground is
// reported as such while one in the background is not.
func TestDialJudgesExecs(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	o := sandboxed(t)
	if err := os.WriteFile(filepath.Join(o.Workspace, "victim"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		argv0      string
		foreground bool
	}
	var mu sync.Mutex
	var saw []seen
	l := bash()
	l.JudgeExec = func(_ context.Context, e execguard.Exec, fg bool) execguard.Verdict {
		mu.Lock()
		saw = append(saw, seen{filepath.Base(e.Path), fg})
		mu.Unlock()
		if filepath.Base(e.Path) == "rm" {
			return execguard.Deny
		}
		return execguard.Allow
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	c, err := o.Dial(ctx, l)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	tm := &term{t: t, conn: c, ws: o.Workspace, eof: make(chan struct{})}
	t.Cleanup(func() { _ = c.Close() })
	go tm.collect()

	tm.send("rm victim; echo rc=$?")
	tm.expect(`Operation not permitted`)
	tm.expect(`rc=126`)
	if _, err := os.Stat(filepath.Join(o.Workspace, "victim")); err != nil {
		t.Fatalf("the victim is gone: %v", err)
	}
	tm.send("/bin/true & wait; echo bg=$?")
	tm.expect(`bg=0`)

	mu.Lock()
	defer mu.Unlock()
	want := map[string]seen{"sh": {"sh", false}, "rm": {"rm", true}, "true": {"true", false}}
	got := map[string]seen{}
	for _, s := range saw {
		if _, ok := want[s.argv0]; ok {
			got[s.argv0] = s
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("exec of %s: saw %+v, want %+v (all: %+v)", k, got[k], w, saw)
		}
	}
}

// TestDialWithJudgeUnsandboxed: a shell without the sandbox has no
// launcher to judge its programs: the judge is not called, and Dial works.
func TestDialWithJudgeUnsandboxed(t *testing.T) {
	o := &Options{Workspace: t.TempDir(), NoSandbox: true}
	l := bash()
	l.JudgeExec = func(context.Context, execguard.Exec, bool) execguard.Verdict {
		t.Error("an unsandboxed shell's exec was judged")
		return execguard.Allow
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	c, err := o.Dial(ctx, l)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	tm := &term{t: t, conn: c, ws: o.Workspace, eof: make(chan struct{})}
	go tm.collect()
	tm.send("/bin/true; echo ok=$?")
	tm.expect(`ok=0`)
}
