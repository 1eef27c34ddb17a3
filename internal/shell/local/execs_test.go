package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestDialJudgesExecs: a sandboxed shell dialled with a judge has every
// program judged, the shell's own start included; a refused rm fails with
// "Operation not permitted"; each program is traced to the shell's child
// it descends from (a job in a session of its own too), one whose parent
// exited before it started is not; and the judge learns how each program
// it allowed ended, when tandem may watch process events (root).
func TestDialJudgesExecs(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	o := sandboxed(t)
	if err := os.WriteFile(filepath.Join(o.Workspace, "victim"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		argv   string
		origin execguard.Origin
		exited chan shell.ExitStatus
	}
	var mu sync.Mutex
	saw := map[string]*seen{}
	l := bash()
	l.JudgeExec = func(_ context.Context, e execguard.Exec, o execguard.Origin) (execguard.Verdict, func(shell.ExitStatus)) {
		s := &seen{argv: strings.Join(e.Argv, " "), origin: o, exited: make(chan shell.ExitStatus, 1)}
		mu.Lock()
		saw[s.argv] = s
		mu.Unlock()
		if filepath.Base(e.Path) == "rm" {
			return execguard.Deny, nil
		}
		return execguard.Allow, func(st shell.ExitStatus) { s.exited <- st }
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
	tm.send("/bin/sh -c 'exit 3'; setsid -w /bin/sh -c 'kill -9 $$' & wait $!; echo bg=$?")
	tm.expect(`bg=9`)
	// The subshell that forks the daemon exits first; the daemon waits
	// until its parent is init (or a subreaper) before it starts a program.
	tm.send(`( export P0=$BASHPID; /bin/sh -c 'while read -r _ _ _ p _ </proc/$$/stat; [ "$p" = "$P0" ]; do :; done; exec /bin/echo daemon' & ); echo started`)
	tm.expect(`started`)
	tm.expect(`daemon`)

	get := func(argv string) *seen {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		s := saw[argv]
		if s == nil {
			t.Fatalf("no exec of %q judged (saw %v)", argv, saw)
		}
		return s
	}
	for _, argv := range []string{"rm victim", "/bin/sh -c exit 3", "/bin/sh -c kill -9 $$"} {
		if s := get(argv); !s.origin.Known || s.origin.Forked == 0 {
			t.Errorf("%s: origin %+v, want one traced to the shell's child", argv, s.origin)
		}
	}
	if s := get("/bin/echo daemon"); s.origin.Known {
		t.Errorf("the daemon's program is traced to the shell: %+v", s.origin)
	}
	if os.Geteuid() != 0 {
		return // no process events: no status is reported, none made up
	}
	c.(shell.ExitSyncer).SyncExits()
	for argv, want := range map[string]shell.ExitStatus{"/bin/sh -c exit 3": {Code: 3}, "/bin/sh -c kill -9 $$": {Code: 137, Signal: "SIGKILL"}} {
		select {
		case st := <-get(argv).exited:
			if st != want {
				t.Errorf("%s ended %+v, want %+v", argv, st, want)
			}
		default:
			t.Errorf("%s: no exit status once its end was synced", argv)
		}
	}
}

// TestDialWithJudgeUnsandboxed: a shell without the sandbox has no
// launcher to judge its programs: the judge is not called, and Dial works.
func TestDialWithJudgeUnsandboxed(t *testing.T) {
	o := &Options{Workspace: t.TempDir(), NoSandbox: true}
	l := bash()
	l.JudgeExec = func(context.Context, execguard.Exec, execguard.Origin) (execguard.Verdict, func(shell.ExitStatus)) {
		t.Error("an unsandboxed shell's exec was judged")
		return execguard.Allow, nil
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
