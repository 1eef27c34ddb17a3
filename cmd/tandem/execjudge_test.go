package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// execDenyConfig is a local target under a policy that allows everything
// but rm, whose shell sources home's .bashrc.
func execDenyConfig(ws, home string) string {
	return "targets: [{name: local, kind: local, workspace: " + ws + ", readOnly: [" + filepath.Join(home, ".bashrc") + "]}]\n" +
		`policy:
  mode: allow
  rules:
    - {command: "rm *", decision: deny}
`
}

// userRC hides rm from the command line: an alias, a function and a
// hashed name that the agent's innocent-looking lines use.
const userRC = `shopt -s expand_aliases
alias ls=rm
f() { rm "$@"; }
hash -p /bin/rm lsh
`

// TestExecJudgingDenies: under a `rm *` deny rule, every route to rm that
// the line judge cannot see is stopped as rm starts, in a local session:
// python's subprocess, a script, an alias, a function, a hashed name and a
// Makefile recipe. The victim survives, the reply lists the block, and the
// audit has the command's programs.
func TestExecJudgingDenies(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	home, ws := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(home, ".bashrc"): userRC,
		filepath.Join(ws, "victim"):    "precious\n",
		filepath.Join(ws, "s.sh"):      "#!/bin/sh\nrm victim\n",
		filepath.Join(ws, "Makefile"):  "all:\n\trm victim\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, serverOpts{home: home, config: execDenyConfig(ws, home)})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "x"}))["sessionToken"])
	se := sess{s, "x", tok}

	tests := []struct {
		name, command string
	}{
		{"python subprocess", `python3 -c 'import subprocess; subprocess.run(["rm","victim"])'`},
		{"script", "./s.sh"},
		{"alias", "ls victim"},
		{"function", "f victim"},
		{"hash -p", "lsh victim"},
		{"makefile recipe", "make"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustOK(t, se.exec(t, tt.command))
			res := result(t, r)
			if b, err := os.ReadFile(filepath.Join(ws, "victim")); err != nil || string(b) != "precious\n" {
				t.Fatalf("the victim did not survive (%v); result %v", err, res)
			}
			out := str(res["stdout"]) + str(res["stderr"])
			if !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "PermissionError") {
				t.Errorf("the output does not say rm was refused: %q", out)
			}
			blocked, _ := res["blocked"].([]any)
			if len(blocked) == 0 {
				t.Fatalf("the reply lists no block: %v", res)
			}
			b0, _ := blocked[0].(map[string]any)
			argv, _ := b0["argv"].([]any)
			if !slices.Contains(argv, any("victim")) || !strings.Contains(str(b0["rule"]), `"rm *"`) || str(b0["cwd"]) != ws {
				t.Errorf("blocked[0] = %v, want rm's argv, the rule and the cwd %s", b0, ws)
			}
		})
	}

	// What is allowed still runs, and is listed in the audit like the rest.
	if got := str(result(t, mustOK(t, se.exec(t, "/bin/cat victim")))["stdout"]); got != "precious\n" {
		t.Fatalf("cat victim printed %q", got)
	}
	mustOK(t, s.call(t, "ssh_disconnect", map[string]any{"sessionName": "x", "sessionToken": tok}))
	var execRecs, blockedCalls int
	sawCat := false
	for _, rec := range auditRecords(t, s.dataDir) {
		switch {
		case rec.Event == "command_execs" && rec.SessionName == "x":
			execRecs++
			var a struct {
				Command string `json:"command"`
				Execs   []struct {
					Argv     []string `json:"argv"`
					Cwd      string   `json:"cwd"`
					Decision string   `json:"decision"`
				} `json:"execs"`
			}
			if err := json.Unmarshal(rec.Args, &a); err != nil {
				t.Fatal(err)
			}
			for _, e := range a.Execs {
				if slices.Equal(e.Argv, []string{"/bin/cat", "victim"}) && e.Decision == "allow" && e.Cwd == ws {
					sawCat = true
				}
			}
		case rec.Event == "tool_call" && rec.Tool == "ssh_exec" && strings.HasPrefix(rec.Reason, "blocked: ") && strings.Contains(rec.Reason, "victim"):
			blockedCalls++
		}
	}
	if execRecs < len(tests)+1 || blockedCalls != len(tests) || !sawCat {
		t.Errorf("audit: %d command_execs records (want %d+), %d calls with blocked (want %d), cat listed %v", execRecs, len(tests)+1, blockedCalls, len(tests), sawCat)
	}
}
