package mcp_test

import (
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// gitHunk makes a repository with one unstaged hunk, for git add -p.
const gitHunk = `cd "$(mktemp -d)" && git init -q && echo a > f && git add f && ` +
	`git -c user.email=a@example.com -c user.name=a commit -qm one && echo b >> f && `

// TestWaitingForInput: a command blocked reading its terminal is reported
// as waiting, with the prompt it printed; a busy or sleeping command is
// not. Each is then cancelled and the session stays usable.
func TestWaitingForInput(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "prompts")
	tests := []struct {
		name, cmd, lastLine string
		waiting             bool
	}{
		{"read builtin", `read -p "Name: " x`, "Name: ", true},
		{"python input", `python3 -c 'input("Continue? [y/N] ")'`, "Continue? [y/N] ", true},
		{"cat", `echo reading; cat`, "reading", true},
		{"node raw mode", `node -e 'process.stdout.write("Pick: "); process.stdin.setRawMode(true); process.stdin.once("data", () => process.exit(0))'`, "Pick: ", true},
		{"node canonical", `node -e 'process.stdout.write("Name: "); process.stdin.once("data", () => process.exit(0))'`, "Name: ", true},
		{"node raw mode, not reading", `node -e 'process.stdin.setRawMode(true); process.stdout.write("computing"); setTimeout(() => {}, 30000)'`, "computing", false},
		{"computing", `printf working; while :; do :; done`, "working", false},
		{"git add -p", gitHunk + `git add -p`, "(1/1) Stage this hunk [", true},
		{"git add -p, one key", gitHunk + `git -c interactive.singleKey=true add -p`, "(1/1) Stage this hunk [", true},
		{"sleep", `echo working; sleep 30`, "working", false},
		{"stdin redirected", `echo piped; cat < /dev/zero > /dev/null`, "piped", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mcptest.WantError(t, c.Call(t, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
				"command": tc.cmd, "timeoutSeconds": 2}), "command_timeout")
			if r["waitingForInput"] != tc.waiting || !strings.HasPrefix(mcptest.Str(r["lastLine"]), tc.lastLine) {
				t.Errorf("waitingForInput %v, lastLine %q: %s", r["waitingForInput"], r["lastLine"], r["message"])
			}
			mcptest.MustOK(t, c.Call(t, "ssh_cancel", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))
		})
	}
	if r := mcptest.Result(t, exec(t, c, s, "echo still")); r["stdout"] != "still\n" {
		t.Fatalf("after the prompts: %v", r)
	}
}
