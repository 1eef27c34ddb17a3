package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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

	// The monitoring page's strip lists the blocked program with its rule.
	url := str(mustOK(t, s.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "x", "sessionToken": tok}))["monitoringUrl"])
	stripShows(t, url, dataDirToken(t, s.dataDir), `"command":"rm victim","rule":"rules[`)

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
				// Named in literal words by its line: judged with it ("line").
				if slices.Equal(e.Argv, []string{"/bin/cat", "victim"}) && e.Decision == "line" && e.Cwd == ws {
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

// gitPushRepo makes ws/remote.git and a clone ws/repo with one commit and
// push.sh, a script that pushes it: git push runs inside a script, where
// the line judge never sees it.
func gitPushRepo(t *testing.T, ws string) (repo string) {
	t.Helper()
	repo = filepath.Join(ws, "repo")
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", filepath.Join(ws, "remote.git")},
		{"init", "-q", "-b", "main", repo},
		{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "one"},
		{"-C", repo, "remote", "add", "origin", filepath.Join(ws, "remote.git")},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "push.sh"), []byte("#!/bin/sh\ngit push -q origin main\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return repo
}

// waitCommand follows a running command with ssh_read_output until it
// ends, and returns its last reply.
func waitCommand(t *testing.T, se sess, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := mustOK(t, se.srv.call(t, "ssh_read_output", map[string]any{"sessionName": se.name, "sessionToken": se.tok,
			"commandId": id, "stream": "stderr", "waitSeconds": 5}))
		if r["running"] == false {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("command %s still running: %v", id, r)
		}
	}
}

// gitPushPolicy is tandem.yaml for one local target rooted at ws whose
// policy allows all but `git push *`, which gets decision; policyExtra
// goes inside the policy block, extra after it.
func gitPushPolicy(ws, decision, policyExtra, extra string) string {
	return "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" +
		"policy:\n  mode: allow\n  rules:\n    - {command: \"git push *\", decision: " + decision + "}\n" + policyExtra + extra
}

// TestExecJudgingAsks: an ask rule on `git push *` holds a git push that
// a script starts. The call answers approval_pending with the commandId;
// the approval names the program's argv, its cwd and the agent's command
// line; approving on the dashboard (in Chromium) lets the push run,
// denying there fails it with "Operation not permitted".
func TestExecJudgingAsks(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	cfg := gitPushPolicy(ws, "ask", "", "approvals: {waitSeconds: 1, timeoutSeconds: 300}\n")
	srv := startServer(t, serverOpts{config: cfg})
	op := newOperatorClient(t, srv)
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "g"}))["sessionToken"])
	m := []string{"", dashboardLink(t, srv.dataDir)}
	browser := testenv.Browser(t)
	if err := chromedp.Do(browser, chromedp.Navigate(m[1]), chromedp.WaitVisible(`#pending-empty`)); err != nil {
		t.Fatal(err)
	}
	se := sess{srv, "g", tok}
	remoteHead := func() string {
		out, _ := exec.Command("git", "-C", filepath.Join(ws, "remote.git"), "rev-parse", "-q", "--verify", "main").Output()
		return strings.TrimSpace(string(out))
	}

	for _, approve := range []bool{true, false} {
		t.Run(map[bool]string{true: "approved", false: "denied"}[approve], func(t *testing.T) {
			if !approve {
				if out, err := exec.Command("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "two").CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, out)
				}
			}
			before := remoteHead()
			e := wantError(t, se.exec(t, "cd "+repo+" && ./push.sh"), "approval_pending")
			id, cmdID := str(e["approvalId"]), str(e["commandId"])
			prog, _ := e["program"].(map[string]any)
			if e["running"] != true || cmdID == "" || str(prog["command"]) != "git push -q origin main" || str(prog["cwd"]) != repo {
				t.Fatalf("approval_pending reply: %v", e)
			}
			// What the operator is shown: argv, cwd and the agent's line.
			var shown map[string]any
			for _, p := range op.do(t, http.MethodGet, "/api/state", "")["pending"].([]any) {
				if a, _ := p.(map[string]any); str(a["id"]) == id {
					shown, _ = a["action"].(map[string]any)
				}
			}
			if str(shown["command"]) != "git push -q origin main" || str(shown["cwd"]) != repo || str(shown["parent"]) != "cd "+repo+" && ./push.sh" {
				t.Fatalf("the dashboard shows %v", shown)
			}
			if remoteHead() != before {
				t.Fatal("git push ran before anyone approved it")
			}
			// The operator decides on the dashboard, in Chromium, from a card
			// that names the program and the line that started it.
			card := `//ol[@id="pending"]/li[.//code[text()="git push -q origin main"]]`
			button := map[bool]string{true: "Approve", false: "Deny"}[approve]
			if err := chromedp.Do(browser,
				chromedp.WaitVisible(card+`//dt[text()="Program"]`),
				chromedp.WaitVisible(card+`//code[text()="cd `+repo+` && ./push.sh"]`),
				chromedp.Click(card+`//button[@aria-label="`+button+`"]`),
			); err != nil {
				t.Fatalf("the dashboard's card: %v", err)
			}
			r := waitCommand(t, se, cmdID)
			pushed := remoteHead() != before
			if pushed != approve {
				t.Fatalf("approve %v, pushed %v: %v", approve, pushed, r)
			}
			if !approve && !strings.Contains(str(r["data"]), "Operation not permitted") {
				t.Errorf("a denied push should fail with Operation not permitted: %v", r)
			}
		})
	}
}

// TestExecJudgingAttribution: a program that the agent's command left in
// the background is judged after the command ended; a person's own
// command in the browser terminal is recorded, not judged.
func TestExecJudgingAttribution(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	home, ws := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(home, ".bashrc"):  "",
		filepath.Join(ws, "victim-bg"):  "precious\n",
		filepath.Join(ws, "victim-hum"): "mine\n",
		filepath.Join(ws, "later.sh"):   "#!/bin/sh\nwhile [ ! -e go ]; do sleep 0.05; done\nrm victim-bg\necho $? > done\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, serverOpts{home: home, config: execDenyConfig(ws, home)})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "a"}))["sessionToken"])
	se := sess{s, "a", tok}

	t.Run("background job after its command ended", func(t *testing.T) {
		mustOK(t, se.exec(t, "./later.sh >/dev/null 2>&1 &"))
		if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		var done []byte
		for {
			var err error
			if done, err = os.ReadFile(filepath.Join(ws, "done")); err == nil && len(done) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the background job never finished")
			}
			time.Sleep(20 * time.Millisecond) // polling the file the job writes, as a person would look
		}
		if _, err := os.Stat(filepath.Join(ws, "victim-bg")); err != nil || strings.TrimSpace(string(done)) == "0" {
			t.Fatalf("rm ran in the background after its command ended (status %q, victim %v)", done, err)
		}
	})

	t.Run("a person's own command", func(t *testing.T) {
		url := str(mustOK(t, s.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "a", "sessionToken": tok}))["monitoringUrl"])
		typeOverWebSocket(t, url, dataDirToken(t, s.dataDir), "rm victim-hum; echo rc=$?\r", "rc=0")
		if _, err := os.Stat(filepath.Join(ws, "victim-hum")); err == nil {
			t.Fatal("the human's rm was blocked")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			var human bool
			for _, rec := range auditRecords(t, s.dataDir) {
				human = human || (rec.Event == "command_execs" && strings.Contains(string(rec.Args), `"decision":"human"`) &&
					strings.Contains(string(rec.Args), `"victim-hum"`))
			}
			if human {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no command_execs record lists the human's rm as theirs")
			}
			time.Sleep(50 * time.Millisecond) // the journal writes after the command ends
		}
	})
}
