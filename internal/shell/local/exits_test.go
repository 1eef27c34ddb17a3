package local

import (
	"encoding/binary"
	"testing"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// ev is a process event's data, as the connector lays it out.
func ev(words ...uint32) []byte {
	b := make([]byte, 4*len(words))
	for i, w := range words {
		binary.NativeEndian.PutUint32(b[4*i:], w)
	}
	return b
}

// TestExitWatchEvents: a program's status is told only once its exec
// happened and its process (not a thread) exited; a pid reused by a new
// process, or an exit while an exec is in flight, tells nothing; entries
// end with their process and stay within maxWatched.
func TestExitWatchEvents(t *testing.T) {
	const pid = 4242
	exec := func() (uint32, []byte) { return procEventExec, ev(pid, pid) }
	exit := func(code uint32) (uint32, []byte) { return procEventExit, ev(pid, pid, code, 17, 1, 1) }
	threadExit := func() (uint32, []byte) { return procEventExit, ev(pid+1, pid, 0, 17, 1, 1) }
	fork := func() (uint32, []byte) { return procEventFork, ev(1, 1, pid, pid) }
	type step func() (uint32, []byte)
	tests := []struct {
		name  string
		steps []step
		want  *shell.ExitStatus
	}{
		{"exec then exit", []step{exec, func() (uint32, []byte) { return exit(3 << 8) }}, &shell.ExitStatus{Code: 3}},
		{"killed", []step{exec, func() (uint32, []byte) { return exit(9) }}, &shell.ExitStatus{Code: 137, Signal: "SIGKILL"}},
		{"no exec happened", []step{func() (uint32, []byte) { return exit(0) }}, nil},
		{"a thread ends", []step{exec, threadExit}, nil},
		{"the pid is reused", []step{exec, fork, func() (uint32, []byte) { return exit(0) }}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &exitWatch{procs: map[int]*watched{}}
			var got *shell.ExitStatus
			w.procs[pid] = &watched{pending: func(st shell.ExitStatus) { got = &st }}
			for _, s := range tt.steps {
				w.event(s())
			}
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("told %+v, want %+v", got, tt.want)
			}
			if tt.want != nil && len(w.procs) != 0 {
				t.Fatalf("%d entries left after the process exited", len(w.procs))
			}
		})
	}

	t.Run("an exit while an exec is in flight", func(t *testing.T) {
		w := &exitWatch{procs: map[int]*watched{}}
		told := 0
		w.procs[pid] = &watched{running: func(shell.ExitStatus) { told++ }, pending: func(shell.ExitStatus) { told += 10 }}
		w.event(exit(0)) // the main thread ends as another thread execs
		w.event(exec())
		w.event(exit(0))
		if told != 10 {
			t.Fatalf("told %d, want the new program's status once (10)", told)
		}
	})
}

// TestExitWatchBounded: past maxWatched processes, more are not followed,
// and closing the watch forgets them all.
func TestExitWatchBounded(t *testing.T) {
	w, err := newExitWatch()
	if err != nil {
		testenv.Missing(t, "process events: %v", err)
	}
	for tgid := range maxWatched + 10 {
		w.expect(1<<30+tgid, func(shell.ExitStatus) {})
	}
	w.mu.Lock()
	n := len(w.procs)
	w.mu.Unlock()
	if n != maxWatched {
		t.Fatalf("%d processes followed, want %d", n, maxWatched)
	}
	w.close()
	if w.procs != nil {
		t.Fatal("the watch kept its processes after close")
	}
}
