package execguard_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// benchExecs is how many programs one command of the benchmark starts.
const benchExecs = 1000

// BenchmarkExecJudging runs one command that starts /bin/true 1,000 times
// in the sandbox, with exec judging off and on (the README's example
// policy, judged as tandem judges: DecideExec, which looks at the program
// in the process's view and reads its #! line). It reports the time per
// command each way, their ratio, and the median of the judge's own time
// per exec (the policy decision with its look).
func BenchmarkExecJudging(b *testing.B) {
	if err := execguard.Available(); err != nil {
		b.Skip(err)
	}
	pol, err := policy.Compile("ask", []policy.RuleSpec{
		{Tool: "ssh_connect", Decision: "allow"}, {Tool: "ssh_disconnect", Decision: "allow"},
		{Command: "git status", Decision: "allow"}, {Command: "git diff *", Decision: "allow"},
		{Command: "rm -rf *", Decision: "deny"},
	})
	if err != nil {
		b.Fatal(err)
	}
	script := "for ((i = 0; i < " + strconv.Itoa(benchExecs) + "; i++)); do /bin/true; done"
	var off, on time.Duration
	var mu sync.Mutex
	var decisions, judged []time.Duration
	judge := func(_ context.Context, e execguard.Exec) execguard.Verdict {
		t0 := time.Now()
		t1 := time.Now()
		v := pol.DecideExec(policy.Exec{Tool: "ssh_exec", Path: e.Path, Argv: e.Argv, Truncated: e.Truncated, Look: e.Look})
		t2 := time.Now()
		mu.Lock()
		decisions = append(decisions, t2.Sub(t1))
		judged = append(judged, t2.Sub(t0))
		mu.Unlock()
		if v.Decision == policy.Deny {
			return execguard.Deny
		}
		return execguard.Allow
	}
	for b.Loop() {
		off += runBench(b, script, nil)
		on += runBench(b, script, judge)
	}
	n := float64(b.N)
	b.ReportMetric(off.Seconds()*1000/n, "ms/cmd-off")
	b.ReportMetric(on.Seconds()*1000/n, "ms/cmd-on")
	b.ReportMetric(on.Seconds()/off.Seconds(), "on/off")
	b.ReportMetric(median(decisions), "µs/decision-p50")
	b.ReportMetric(median(judged), "µs/judge-p50")
}

// median returns the median of ds in microseconds.
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Nanoseconds()) / 1000
}

// runBench runs script once in the sandbox, judged by judge unless nil,
// and returns how long it took from start to exit.
func runBench(b *testing.B, script string, judge execguard.Judge) time.Duration {
	b.Helper()
	ws := b.TempDir()
	p := sandbox.Policy{ReadWrite: []string{ws}, ReadOnly: sandbox.DefaultReadOnly()}
	var parent, child *os.File
	if judge != nil {
		var err error
		if parent, child, err = execguard.Pair(); err != nil {
			b.Fatal(err)
		}
		defer parent.Close()
		p.ExecFD = 3
	}
	cmd, err := sandbox.Command(self, p, []string{"/bin/bash", "-c", script})
	if err != nil {
		b.Fatal(err)
	}
	cmd.Dir, cmd.Env = ws, []string{"PATH=/usr/bin:/bin"}
	if child != nil {
		cmd.ExtraFiles = []*os.File{child}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if child != nil {
		_ = child.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := execguard.Receive(ctx, parent)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		sctx, scancel := context.WithCancel(context.Background())
		defer scancel()
		go func() { _ = l.Serve(sctx, judge) }()
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%s: %v", cmd, err)
	}
	return time.Since(start)
}
