package policy

import "testing"

// TestExecSeenAsks: under exec judging a line that hides only which
// programs it runs is allowed by mode allow, while a line whose risk no
// exec shows (a write to a file the shell runs, a builtin that changes
// what runs at the prompt, a line that does not parse) asks as before; a
// rule that names a builtin, which no exec enforces, keeps every such line
// asked; and without exec judging (an SSH session) they all ask.
func TestExecSeenAsks(t *testing.T) {
	programs := []RuleSpec{{Command: "rm *", Decision: "deny"}, {Command: "git push *", Decision: "deny"}}
	withBuiltin := append([]RuleSpec{{Command: "kill *", Decision: "ask"}}, programs...)
	withStar := append([]RuleSpec{{Command: "* --force", Decision: "deny"}}, programs...)
	// relaxed are the lines the issue names, and their kin.
	relaxed := []string{
		"source .venv/bin/activate",
		"set -a; . ./.env",
		"PATH=$PATH:/opt/bin ls",
		"alias ll='ls -l'",
		"git config user.email x",
		"for i in 1 2 3; do echo $((i % 2)); done",
		"echo hi!x",
		"eval \"$cmd\"",
		"export PATH=$PATH:/opt/bin",
		"declare -i n=2",
		"echo ${a[i]}",
		"set -o allexport",
	}
	// asked stay asked under exec judging: no exec shows what they do.
	asked := []string{
		"echo x > .bashrc",
		"cp hook .git/hooks/pre-commit",
		"echo 'unclosed",
		"enable -f ./x.so x",
		"hash -p /bin/ls ll",
		"trap 'ls' DEBUG",
		"PROMPT_COMMAND='ls'",
		"export PS1='$(ls) '",
		"bind -x '\"\\C-t\": ls'",
		"shopt -u interactive_comments",
		"set -o vi",
		"set -T",
		"read $name",
		"$cmd x",
		"unalias ll",
	}
	// denied stay denied: the line's judge sees rm and git push through
	// the wrapper or builtin.
	denied := []string{
		"exec rm x", "command rm x", "builtin exec rm x", "source x; rm y", "alias zz='rm x'",
		"set -a; git push origin", "eval x; sudo rm -rf /", "f() { rm x; }",
	}
	cases := []struct {
		name  string
		rules []RuleSpec
		exec  bool
		lines []string
		want  Decision
	}{
		{"exec judged: relaxed", programs, true, relaxed, Allow},
		{"exec judged: job specs", programs, true, []string{"sleep 1 & wait %1", "fg %1", "kill %2", "wait -n %1 %2"}, Allow},
		{"not exec judged: job specs", programs, false, []string{"sleep 1 & wait %1", "fg %1", "kill %2"}, Allow},
		{"exec judged: asked", programs, true, asked, Ask},
		{"exec judged: denied", programs, true, denied, Deny},
		{"not exec judged: relaxed lines ask", programs, false, relaxed, Ask},
		{"exec judged, a rule names a builtin", withBuiltin, true, relaxed, Ask},
		{"exec judged, a rule's command word is *", withStar, true, relaxed, Ask},
		{"exec judged, mode ask", programs, true, relaxed[:4], Ask},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode := "allow"
			if tc.name == "exec judged, mode ask" {
				mode = "ask"
			}
			p, err := Compile(mode, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.lines {
				v := p.Decide(Input{Tool: "ssh_exec", Command: line, HasCommand: true, ExecJudged: tc.exec})
				if v.Decision != tc.want {
					t.Errorf("%q: %s (%s: %s), want %s", line, v.Decision, v.Rule, v.Reason, tc.want)
				}
			}
		})
	}
}

// TestWaitSubscript: wait -p still names a variable, which a subscript
// makes code; only its operands are job specs.
func TestWaitSubscript(t *testing.T) {
	p, err := Compile("allow", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"wait -p 'a[$(touch pwn)]' %1", "wait -p PROMPT_COMMAND"} {
		if v := p.Decide(Input{Tool: "ssh_exec", Command: line, HasCommand: true}); v.Decision != Ask {
			t.Errorf("%q: %s (%s), want ask", line, v.Decision, v.Reason)
		}
	}
}
