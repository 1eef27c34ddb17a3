package policy

import (
	"strings"
	"testing"
)

func TestDecidePath(t *testing.T) {
	rules := []RuleSpec{
		{Tool: "ssh_upload", Path: ".git/**", Decision: "deny"},     // 0
		{Path: "*.pem", Decision: "ask"},                            // 1
		{Tool: "ssh_download", Decision: "allow"},                   // 2
		{Tool: "ssh_download", Path: "secrets/*", Decision: "deny"}, // 3
		{Command: "cat *", Decision: "deny"},                        // 4: never judges a path
		{Tool: "ssh_exec", Decision: "allow"},                       // 5
	}
	p, err := Compile("allow", rules)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, path string
		want       Decision
		rule       string
	}{
		{"ssh_upload", ".git/config", Deny, "rules[0]"},
		{"ssh_upload", ".git", Deny, "rules[0]"},
		{"ssh_upload", ".git/hooks/pre-commit", Deny, "rules[0]"},
		{"ssh_upload", ".github/workflows/ci.yml", Allow, "mode allow"},
		{"ssh_upload", "src/.git/config", Allow, "mode allow"},
		{"ssh_download", ".git/config", Allow, "rules[2]"},
		{"ssh_upload", "key.pem", Ask, "rules[1]"},
		{"ssh_upload", "deep/er/key.pem", Ask, "rules[1]"},
		{"ssh_download", "deep/key.pem", Ask, "rules[1]"},
		{"ssh_download", "secrets/db", Deny, "rules[3]"},
		{"ssh_download", "secrets/db/x", Allow, "rules[2]"},
		{"ssh_upload", "cat", Allow, "mode allow"},
		// Not relative to the workspace: never judged as allowed.
		{"ssh_upload", "../etc/passwd", Ask, "unjudgeable"},
		{"ssh_upload", "/etc/passwd", Ask, "unjudgeable"},
		{"ssh_upload", strings.Repeat("a/", 3000), Ask, "unjudgeable"},
	}
	for _, tc := range tests {
		v := p.Decide(Input{Tool: tc.tool, Path: tc.path, HasPath: true})
		if v.Decision != tc.want || !strings.HasPrefix(v.Rule, tc.rule) {
			t.Errorf("%s %q = %v by %q (%s), want %v by %s", tc.tool, tc.path, v.Decision, v.Rule, v.Reason, tc.want, tc.rule)
		}
	}
	// Path rules judge no command, and a path-only rule is no tool rule.
	if v := p.Decide(Input{Tool: "ssh_exec", Command: "ls key.pem", HasCommand: true}); v.Decision != Allow {
		t.Errorf("ssh_exec judged by a path rule: %+v", v)
	}
	if v := p.Decide(Input{Tool: "ssh_upload"}); v.Decision != Allow || v.Rule != "mode allow" {
		t.Errorf("ssh_upload without a path: %+v", v)
	}
	v := p.Decide(Input{Tool: "ssh_upload", Path: ".git/config", HasPath: true})
	if v.Rule != `rules[0] {tool: ssh_upload, path: ".git/**", decision: deny}` || !strings.Contains(v.Reason, ".git/config") {
		t.Errorf("verdict names no rule: %+v", v)
	}
}

func TestCompilePathErrors(t *testing.T) {
	tests := []struct {
		rule RuleSpec
		want string
	}{
		{RuleSpec{Path: "/etc/*", Decision: "deny"}, "rules[0].path: \"/etc/*\" is absolute"},
		{RuleSpec{Path: "../x", Decision: "deny"}, `has ".."`},
		{RuleSpec{Path: "[", Decision: "deny"}, "syntax error in pattern"},
		{RuleSpec{Path: "a", Command: "ls", Decision: "deny"}, "a command or a path, not both"},
	}
	for _, tc := range tests {
		_, err := Compile("", []RuleSpec{tc.rule})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want %q", tc.rule, err, tc.want)
		}
	}
}
