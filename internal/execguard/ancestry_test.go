package execguard_test

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// startTicks reads field 22 of /proc/PID/stat.
func startTicks(t *testing.T, pid int) execguard.Ticks {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return execguard.Ticks(n)
}

// ppid reads field 4 of /proc/PID/stat.
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

// TestTrace: a shell's child and grandchild trace to the shell's child,
// whatever session they made; a double-forked daemon (its parent exited)
// and a process outside the tree do not trace to the shell at all; the
// shell's own exec is placed now.
func TestTrace(t *testing.T) {
	cmd := exec.Command("bash", "-c", `sleep 30 & echo child $!
(sleep 31 & echo daemon $!)
bash -c 'setsid sleep 32 & echo grandchild $!; wait' & echo inner $!
wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	pid := map[string]int{}
	for len(pid) < 4 && sc.Scan() {
		name, n, _ := strings.Cut(sc.Text(), " ")
		p, err := strconv.Atoi(n)
		if err != nil {
			t.Fatal(err)
		}
		pid[name] = p
	}
	if len(pid) < 4 {
		t.Fatalf("pids: %v", pid)
	}
	child, daemon, grandchild, inner := pid["child"], pid["daemon"], pid["grandchild"], pid["inner"]
	pids := []int{child, daemon, grandchild, inner}
	t.Cleanup(func() {
		for _, p := range pids {
			_ = exec.Command("kill", strconv.Itoa(p)).Run()
		}
	})
	shell := cmd.Process.Pid
	// The subshell that forked the daemon exits: the daemon is reparented
	// (to init, or to a subreaper outside the shell's tree).
	for deadline := time.Now().Add(5 * time.Second); ppid(ppid(daemon)) == shell; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon %d was not reparented (parent %d)", daemon, ppid(daemon))
		}
	}

	tests := []struct {
		name  string
		pid   int
		known bool
		at    int // the process whose start time Forked is; 0: none
	}{
		{"the shell's child", child, true, child},
		{"a grandchild in a session of its own", grandchild, true, inner},
		{"a double-forked daemon", daemon, false, 0},
		{"a process outside the tree", os.Getpid(), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := execguard.Trace(tt.pid, shell)
			if err != nil {
				t.Fatal(err)
			}
			if o.Known != tt.known {
				t.Fatalf("Trace(%d) = %+v, want known %v", tt.pid, o, tt.known)
			}
			if tt.at != 0 && o.Forked != startTicks(t, tt.at) {
				t.Fatalf("Forked %d, want %d (the start of %d)", o.Forked, startTicks(t, tt.at), tt.at)
			}
		})
	}
	t.Run("the shell itself", func(t *testing.T) {
		before := startTicks(t, shell)
		o, err := execguard.Trace(shell, shell)
		if err != nil || !o.Known || o.Forked < before {
			t.Fatalf("Trace(shell) = %+v, %v", o, err)
		}
	})
	t.Run("a gone process", func(t *testing.T) {
		if _, err := execguard.Trace(1<<22+1, shell); err == nil {
			t.Fatal("no error for a process that does not exist")
		}
	})
}

// TestTgid: a thread resolves to its process.
func TestTgid(t *testing.T) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if got, err := execguard.Tgid(tid); err != nil || got != os.Getpid() {
			t.Errorf("Tgid(%d) = %d, %v, want %d", tid, got, err, os.Getpid())
		}
	}
	if len(ents) < 2 {
		t.Fatalf("the test process has %d threads", len(ents))
	}
}
