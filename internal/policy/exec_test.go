package policy

import (
	"strings"
	"testing"
)

func TestDecideExec(t *testing.T) {
	p, err := Compile("ask", []RuleSpec{
		{Command: "rm *", Decision: "deny"},
		{Command: "git push *", Decision: "ask"},
		{Command: "git status", Decision: "allow"},
		{Command: "rm victim-ok", Decision: "allow"},
		{Tool: "ssh_exec", Decision: "ask"},
		{Tool: "Bash", Command: "curl *", Decision: "deny"},
		{Command: "/opt/tool/bin/danger *", Decision: "deny"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		e    Exec
		want Decision
		rule string // a substring of Verdict.Rule; "" means no rule
	}{
		{"rm by name", Exec{Path: "/usr/bin/rm", Argv: []string{"rm", "victim"}}, Deny, `"rm *"`},
		{"rm renamed argv[0]", Exec{Path: "/usr/bin/rm", Argv: []string{"ls", "victim"}}, Deny, `"rm *"`},
		{"rm through a symlink", Exec{Path: "/w/ls", Resolved: "/usr/bin/rm", Argv: []string{"./ls", "victim"}}, Deny, `"rm *"`},
		{"rm with no argv", Exec{Path: "/usr/bin/rm"}, Deny, `"rm *"`},
		{"deny beats a narrower allow", Exec{Path: "/usr/bin/rm", Argv: []string{"rm", "victim-ok"}}, Deny, `"rm *"`},
		{"git push asks", Exec{Path: "/usr/bin/git", Argv: []string{"git", "push", "origin", "main"}}, Ask, `"git push *"`},
		{"git status allowed by rule", Exec{Path: "/usr/bin/git", Argv: []string{"git", "status"}}, Allow, `"git status"`},
		{"no rule: allowed, mode and tool rules do not apply", Exec{Path: "/usr/bin/ls", Argv: []string{"ls", "-l"}}, Allow, ""},
		{"another tool's rule does not apply", Exec{Path: "/usr/bin/curl", Argv: []string{"curl", "x"}}, Allow, ""},
		{"rule by full path", Exec{Path: "/opt/tool/bin/danger", Argv: []string{"danger", "x"}}, Deny, "danger"},
		{"truncated argv: a rule that might match asks", Exec{Path: "/usr/bin/git", Argv: []string{"git"}, Truncated: true}, Ask, `"git push *"`},
		{"truncated argv of rm still denied", Exec{Path: "/usr/bin/rm", Argv: []string{"rm", "a"}, Truncated: true}, Deny, `"rm *"`},
		{"quotes are data, not syntax", Exec{Path: "/usr/bin/echo", Argv: []string{"echo", "$(rm victim)", "; rm x"}}, Allow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.e.Tool = "ssh_exec"
			v := p.DecideExec(tt.e)
			if v.Decision != tt.want || (tt.rule == "") != (v.Rule == "") || !strings.Contains(v.Rule, tt.rule) {
				t.Errorf("DecideExec = %v %q (%s), want %v with rule %q", v.Decision, v.Rule, v.Reason, tt.want, tt.rule)
			}
			if v.Reason == "" {
				t.Error("no reason")
			}
		})
	}
	if !p.JudgesExecs() {
		t.Error("JudgesExecs() = false with a deny rule")
	}
	for _, q := range []*Policy{nil, mustCompileRules(t, "deny", []RuleSpec{{Command: "ls *", Decision: "allow"}, {Tool: "ssh_exec", Decision: "deny"}})} {
		if q.JudgesExecs() {
			t.Errorf("JudgesExecs() = true for a policy without refusing command rules")
		}
	}
	var nilPolicy *Policy
	if v := nilPolicy.DecideExec(Exec{Argv: []string{"rm"}}); v.Decision != Allow {
		t.Errorf("nil policy: %v", v.Decision)
	}
}

func mustCompileRules(t *testing.T, mode string, rules []RuleSpec) *Policy {
	t.Helper()
	p, err := Compile(mode, rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkDecideExec is the policy's share of one judged exec.
func BenchmarkDecideExec(b *testing.B) {
	p, err := Compile("ask", []RuleSpec{
		{Command: "rm *", Decision: "deny"}, {Command: "git push *", Decision: "ask"},
		{Command: "git status", Decision: "allow"}, {Command: "echo *", Decision: "allow"},
	})
	if err != nil {
		b.Fatal(err)
	}
	e := Exec{Tool: "ssh_exec", Path: "/usr/bin/true", Resolved: "/usr/bin/true", Argv: []string{"/bin/true", "a", "b"}}
	b.ReportAllocs()
	for b.Loop() {
		p.DecideExec(e)
	}
}

// TestJudgedArgv: the argv a line names whole, wrappers' own included;
// nothing that expands, reads input or fails to parse.
func TestJudgedArgv(t *testing.T) {
	p := mustCompileRules(t, "ask", nil)
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"rm data.txt", []string{"rm data.txt"}},
		{"cd /tmp && rm -f a b; echo done", []string{"cd /tmp", "rm -f a b", "echo done"}},
		{"echo rm data.txt", []string{"echo rm data.txt"}},
		{"bash -c 'rm x'", []string{"bash -c 'rm x'", "rm x"}},
		{"rm $F", nil},
		{"rm *.o", nil},
		{"xargs rm < list", []string{"xargs rm"}},
		{"rm 'a b'", []string{"rm 'a b'"}},
		{"if true; then", nil},
	} {
		var got []string
		for _, argv := range p.JudgedArgv(tc.line) {
			got = append(got, quoteArgvForTest(argv))
		}
		if strings.Join(got, " | ") != strings.Join(tc.want, " | ") {
			t.Errorf("JudgedArgv(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func quoteArgvForTest(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if strings.ContainsAny(a, " '") {
			a = "'" + a + "'"
		}
		b.WriteString(a)
	}
	return b.String()
}
