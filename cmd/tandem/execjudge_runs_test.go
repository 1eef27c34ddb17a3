package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// ldso is the x86-64 dynamic loader, by the path programs name it with.
const ldso = "/lib64/ld-linux-x86-64.so.2"

// TestExecJudgingRuns: under `git push *` and `rm *` deny rules, the
// routes that start a denied program without an exec of its own name are
// stopped as they start, in a real sandboxed bash through real tandem:
// git opened on the shell's descriptor 9 and run as /dev/fd/9,
// /proc/self/fd/9 or a symlink x to it; a #! script whose interpreter is
// rm, or git with push as its argument; the dynamic loader running git
// push (plain, and after loader options); git's git-core/git-push. Each
// reply lists the blocked argv with its rule, the audit records it, and
// nothing was pushed or removed. What is allowed still runs: a #!/bin/sh
// script, git status through git-core, the loader running echo.
func TestExecJudgingRuns(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	for _, p := range []string{ldso, "/usr/lib/git-core/git-push", "/usr/lib/git-core/git-status"} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, "the test runs %s: %v", p, err)
		}
	}
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	remote := filepath.Join(ws, "remote.git")
	// git push ./pushs pushes to remote.git: the #! script's own path is
	// the remote that its interpreter line pushes to.
	if out, err := exec.Command("git", "-C", repo, "config", "url."+remote+".insteadOf", "./pushs").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	files := map[string]string{
		filepath.Join(ws, "victim"):   "precious\n",
		filepath.Join(ws, "rmf"):      "#!/bin/rm -f\n",
		filepath.Join(repo, "pushs"):  "#!/usr/bin/git push\n",
		filepath.Join(repo, "ld.sh"):  "#!/bin/sh\n" + ldso + " /usr/bin/git push -q origin main\n",
		filepath.Join(repo, "ldo.sh"): "#!/bin/sh\n" + ldso + " --library-path /lib/x86_64-linux-gnu --inhibit-cache --argv0 git /usr/bin/git push -q origin main\n",
		filepath.Join(repo, "gc.sh"):  "#!/bin/sh\n/usr/lib/git-core/git-push -q origin main\n",
		filepath.Join(ws, "ok.sh"):    "#!/bin/sh\necho fine \"$@\"\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" +
		"policy:\n  mode: allow\n  rules:\n    - {command: \"git push *\", decision: deny}\n    - {command: \"rm *\", decision: deny}\n"
	s := startServer(t, serverOpts{config: cfg})
	tok := str(mustOK(t, s.call(t, "ssh_connect", map[string]any{"name": "r"}))["sessionToken"])
	se := sess{s, "r", tok}
	commit := 0
	head := func(dir string) string {
		out, _ := exec.Command("git", "-C", dir, "rev-parse", "-q", "--verify", "main").Output()
		return strings.TrimSpace(string(out))
	}

	tests := []struct {
		name, command string
		argv          []string // the blocked argv
		rule          string
		push          bool // the command would push; otherwise it would remove the victim
	}{
		{"/dev/fd/9", "cd " + repo + " && (exec 9</usr/bin/git; /dev/fd/9 push -q origin main)",
			[]string{"/dev/fd/9", "push", "-q", "origin", "main"}, `"git push *"`, true},
		{"/proc/self/fd/9", "cd " + repo + " && (exec 9</usr/bin/git; /proc/self/fd/9 push -q origin main)",
			[]string{"/proc/self/fd/9", "push", "-q", "origin", "main"}, `"git push *"`, true},
		{"a symlink x to /proc/self/fd/9", "cd " + repo + " && ln -sf /proc/self/fd/9 x && (exec 9</usr/bin/git; ./x push -q origin main)",
			[]string{"./x", "push", "-q", "origin", "main"}, `"git push *"`, true},
		{"#!/bin/rm -f", "cd " + ws + " && ./rmf victim", []string{"./rmf", "victim"}, `"rm *"`, false},
		{"#!/usr/bin/git push", "cd " + repo + " && ./pushs main", []string{"./pushs", "main"}, `"git push *"`, true},
		{"ld.so git push", "cd " + repo + " && ./ld.sh", []string{ldso, "/usr/bin/git", "push", "-q", "origin", "main"}, `"git push *"`, true},
		{"ld.so with options", "cd " + repo + " && ./ldo.sh",
			[]string{ldso, "--library-path", "/lib/x86_64-linux-gnu", "--inhibit-cache", "--argv0", "git", "/usr/bin/git", "push", "-q", "origin", "main"}, `"git push *"`, true},
		{"git-core/git-push", "cd " + repo + " && ./gc.sh", []string{"/usr/lib/git-core/git-push", "-q", "origin", "main"}, `"git push *"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			commit++
			if out, err := exec.Command("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "c"+strings.Repeat("+", commit)).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			res := result(t, mustOK(t, se.exec(t, tt.command)))
			if tt.push && head(remote) == head(repo) {
				t.Errorf("the commit was pushed; result %v", res)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "victim")); err != nil || string(b) != "precious\n" {
				t.Fatalf("the victim did not survive (%v); result %v", err, res)
			}
			blocked, _ := res["blocked"].([]any)
			found := false
			for _, b := range blocked {
				b, _ := b.(map[string]any)
				var argv []string
				for _, a := range b["argv"].([]any) {
					argv = append(argv, str(a))
				}
				if slices.Equal(argv, tt.argv) && strings.Contains(str(b["rule"]), tt.rule) && str(b["decision"]) == "deny" {
					found = true
				}
			}
			if !found {
				t.Errorf("the reply does not list %q blocked by %s: %v", tt.argv, tt.rule, res)
			}
		})
	}

	// What is allowed still runs.
	for _, tt := range []struct{ name, command, want string }{
		{"#!/bin/sh", "cd " + ws + " && ./ok.sh a", "fine a\n"},
		{"git status through git-core", "cd " + repo + " && /usr/lib/git-core/git-status --porcelain=v1 --branch | head -1", "## main"},
		{"ld.so running echo", ldso + " --inhibit-cache /bin/echo hi", "hi\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := result(t, mustOK(t, se.exec(t, tt.command)))
			if !strings.HasPrefix(str(res["stdout"]), tt.want) || res["blocked"] != nil {
				t.Errorf("%s: result %v, want stdout %q and nothing blocked", tt.command, res, tt.want)
			}
		})
	}

	// The audit has each block with its argv and rule.
	mustOK(t, s.call(t, "ssh_disconnect", map[string]any{"sessionName": "r", "sessionToken": tok}))
	audited := map[string]bool{}
	for _, rec := range auditRecords(t, s.dataDir) {
		if rec.Event != "command_execs" || rec.SessionName != "r" {
			continue
		}
		var a struct {
			Execs []struct {
				Argv     []string `json:"argv"`
				Decision string   `json:"decision"`
				Rule     string   `json:"rule"`
			} `json:"execs"`
		}
		if err := json.Unmarshal(rec.Args, &a); err != nil {
			t.Fatal(err)
		}
		for _, e := range a.Execs {
			if e.Decision == "deny" {
				audited[strings.Join(e.Argv, " ")+"\x00"+e.Rule] = true
			}
		}
	}
	for _, tt := range tests {
		ok := false
		for k := range audited {
			argv, rule, _ := strings.Cut(k, "\x00")
			ok = ok || argv == strings.Join(tt.argv, " ") && strings.Contains(rule, tt.rule)
		}
		if !ok {
			t.Errorf("%s: the audit has no denied exec %q with %s (it has %v)", tt.name, tt.argv, tt.rule, audited)
		}
	}
}
