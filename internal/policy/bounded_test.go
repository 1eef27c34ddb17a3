package policy

import (
	"strings"
	"testing"
	"time"
)

// TestBoundedWork decides adversarial commands at the size cap. Each must
// finish quickly and, where it cannot be judged, fail closed.
func TestBoundedWork(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	p, err := Compile("ask", std)
	if err != nil {
		t.Fatal(err)
	}
	n := maxCommandBytes
	rep := func(s string, size int) string { return strings.Repeat(s, size/len(s)) }
	tests := []struct {
		name string
		cmd  string
		want Decision
	}{
		{"many commands", rep("a;", n-2), Ask},
		{"many arguments", "rm " + rep("a ", n-10), Ask},
		{"many non-literal arguments", "rm -rf " + rep("$a ", n-10), Deny},
		{"many wrappers", rep("sudo ", n-10), Ask},
		{"many xargs", rep("xargs ", n-10), Ask},
		{"many find -exec", "find " + rep("-exec ", n-10), Ask},
		{"many env -S", "env -S '" + rep("-S ", n-20) + "'", Ask},
		{"deep subshells", rep("(", n/2) + rep(")", n/2), Ask},
		{"deep substitutions", rep("$(", n/2) + rep(")", n/4), Ask},
		{"many nestings at the limit", rep(rep("$(", 512)+"a"+rep(")", 256)+";", n-1000), Ask},
		{"many arithmetic nestings", rep("$(("+rep("(", 250)+"1"+rep(")", 252)+";", n-600), Ask},
		{"deep bash -c", nest(12, "rm -rf /"), Ask},
		{"long word", "rm -rf " + rep("x", n-10), Deny},
		{"long glob word", "ls " + rep("*", n-10), Allow},
		{"many heredocs", rep("cat <<E\nx\nE\n", n-20), Allow},
		{"many braces", "rm " + rep("{a,b}", n-10), Ask},
		{"over the cap", rep("a", n+1), Ask},
	}
	for _, tt := range tests {
		start := time.Now()
		v := p.Decide(Input{Tool: "ssh_exec", Command: tt.cmd, HasCommand: true})
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", tt.name, d)
		}
		if v.Decision != tt.want {
			t.Errorf("%s: got %v (%s), want %v", tt.name, v.Decision, v.Reason, tt.want)
		}
	}
}
