package policy

import "testing"

// benchRules is a policy of a typical size.
var benchRules = []RuleSpec{
	{Command: "git status *", Decision: "allow"},
	{Command: "git pull *", Decision: "allow"},
	{Command: "git push *", Decision: "forward"},
	{Command: "cd *", Decision: "allow"},
	{Command: "make *", Decision: "allow"},
	{Command: "tee *", Decision: "allow"},
	{Command: "echo *", Decision: "allow"},
	{Command: "systemctl restart *", Decision: "ask"},
	{Command: "rm -rf *", Decision: "deny"},
	{Tool: "ssh_disconnect", Decision: "allow"},
}

func benchDecide(b *testing.B, cmd string, want Decision) {
	p, err := Compile("ask", benchRules)
	if err != nil {
		b.Fatal(err)
	}
	in := Input{Tool: "ssh_exec", Command: cmd, HasCommand: true}
	if v := p.Decide(in); v.Decision != want {
		b.Fatalf("got %+v, want %v", v, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Decide(in)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/decision")
}

// BenchmarkDecide judges a typical compound command; the target is at most
// 50 µs per decision.
func BenchmarkDecide(b *testing.B) {
	benchDecide(b, "cd /srv/app && git pull --ff-only && FOO=1 make -j4 test 2>&1 | tee build.log; sudo systemctl restart app", Ask)
}

// BenchmarkDecideSimple judges the smallest common case.
func BenchmarkDecideSimple(b *testing.B) {
	benchDecide(b, "echo hello", Allow)
}
