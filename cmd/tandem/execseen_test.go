package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// execSeenConfig is a local target under mode allow with deny rules on
// rm and git push, which exec judging enforces; an approval that nobody
// answers turns into approval_pending after a second, so a line that
// asks fails the test at once.
func execSeenConfig(ws string) string {
	return "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" +
		`policy:
  mode: allow
  rules:
    - {command: "rm *", decision: deny}
    - {command: "git push *", decision: deny}
approvals: {waitSeconds: 1}
`
}

// TestExecSeenLinesRun: in a local session with exec judging, ordinary
// lines the line judge cannot see into (a sourced file, set -a, PATH, an
// alias, git config, arithmetic, a job spec, a '!' in a word) run under
// mode allow without an approval, since every rule that could refuse what
// they run is enforced as it starts; and what they run is still judged
// there: a sourced file that runs rm, and an alias a sourced file defined,
// are blocked at exec, as is what eval runs. A line whose risk no exec
// shows still asks.
func TestExecSeenLinesRun(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ws := t.TempDir()
	files := map[string]string{
		".venv/bin/activate": "VIRTUAL_ENV=" + ws + "/.venv\nexport VIRTUAL_ENV\n",
		".env":               "GREETING=hello\n",
		"x":                  "precious\n",
		"zap.sh":             "rm x\n",
		"aliases.sh":         "alias zz='rm x'\n",
	}
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, serverOpts{dir: ws, config: execSeenConfig(ws)})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "x"}))["sessionToken"])
	se := sess{s, "x", tok}
	mustOK(t, se.exec(t, "git init -q ."))

	runs := []struct {
		line, stdout string
	}{
		{"source .venv/bin/activate", ""},
		{"set -a; . ./.env", ""},
		{"PATH=$PATH:/opt/bin ls .env", ".env\n"},
		{"alias ll='ls -l'", ""},
		{"git config user.email x", ""},
		{"for i in 1 2 3; do echo $((i % 2)); done", "1\n0\n1\n"},
		{"sleep 1 & wait %1", ""},
		{"echo hi!x", "hi!x\n"},                                                 // history expansion is off in tandem's shell
		{`bash -c 'echo "$GREETING $VIRTUAL_ENV"'`, "hello " + ws + "/.venv\n"}, // set -a exported what . read
	}
	for _, r := range runs {
		t.Run(r.line, func(t *testing.T) {
			rep := mustOK(t, se.exec(t, r.line))
			res := result(t, rep)
			if id := str(rep["approvalId"]); id != "" {
				t.Errorf("ran after approval %s, want none", id)
			}
			if code, _ := res["exitCode"].(float64); code != 0 {
				t.Errorf("exit %v, stderr %q", res["exitCode"], str(res["stderr"]))
			}
			if got := str(res["stdout"]); r.stdout != "" && got != r.stdout {
				t.Errorf("stdout %q, want %q", got, r.stdout)
			}
		})
	}

	// What a sourced file, an alias or eval runs is judged as it starts.
	for _, line := range []string{"source zap.sh", ". aliases.sh", "zz", `eval "$(cat zap.sh)"`} {
		rep := mustOK(t, se.exec(t, line))
		if line == ". aliases.sh" {
			continue
		}
		res := result(t, rep)
		blocked, _ := res["blocked"].([]any)
		if len(blocked) == 0 || !strings.Contains(str(res["stderr"]), "Operation not permitted") {
			t.Errorf("%q: rm was not blocked at exec: %v", line, res)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "x")); err != nil || string(b) != "precious\n" {
		t.Fatalf("x did not survive: %v", err)
	}

	// The line's judge still refuses what it sees, and asks where no exec
	// shows the risk.
	wantError(t, se.exec(t, "alias zz='rm x'"), "policy_denied")
	wantError(t, se.exec(t, "echo 'ls' >> .bashrc"), "approval_pending")
	wantError(t, se.exec(t, "enable -f ./x.so x"), "approval_pending")
}
