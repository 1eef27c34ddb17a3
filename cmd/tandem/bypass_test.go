package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// bypassPolicy is the README's example policy with the issue's `echo *`
// and an `rm *` deny rule, and a short wait for approvals.
const bypassPolicy = `policy:
  mode: ask
  rules:
    - {tool: ssh_connect, decision: allow}
    - {tool: ssh_disconnect, decision: allow}
    - {command: "git status", decision: allow}
    - {command: "git diff *", decision: allow}
    - {command: "echo *", decision: allow}
    - {command: "rm -rf *", decision: deny}
    - {command: "rm *", decision: deny}
approvals: {waitSeconds: 1, timeoutSeconds: 300}
`

// bypassLines are a representative subset of internal/policy's bypass
// corpus (issue #19). {P} is a file the line would create, {V} a file it
// would delete, {D} a scratch directory. want is the error the call must
// answer: approval_pending for what asks, policy_denied for what reaches
// the `rm *` deny rule.
var bypassLines = []struct{ line, want string }{
	{`echo "Q(touch {P})" !#:1:s/Q/$/`, "approval_pending"},
	{`git diff "Q(touch {P})" !#:2:s/Q/$/`, "approval_pending"},
	{`PROMPT_COMMAND='touch {P}'; git status`, "approval_pending"},
	{`PS0='$(touch {P})'; echo ok`, "approval_pending"},
	{`a='x[$(touch {P})]'; echo $((a))`, "approval_pending"},
	{`[[ -v 'x[$(touch {P})]' ]]`, "approval_pending"},
	{`a='$(touch {P})'; echo ${a@P}`, "approval_pending"},
	{`printf -v 'x[$(touch {P})]' %s 1`, "approval_pending"},
	{`declare -i x='y[$(touch {P})]'`, "approval_pending"},
	{`GIT_EXTERNAL_DIFF='touch {P}' git diff`, "approval_pending"},
	{`echo '[core] fsmonitor = "touch {P}; false"' >> {D}/.git/config; git status`, "approval_pending"},
	{`flock {D}/lock rm {V}`, "policy_denied"},
	{`setpriv rm {V}`, "policy_denied"},
	{`unshare -r rm {V}`, "policy_denied"},
	{`script -qc 'rm {V}' /dev/null`, "policy_denied"},
	{`git -c alias.x='!rm {V}' x`, "policy_denied"},
	{`hash -p /bin/rm ls; ls {V}`, "policy_denied"},
	{`shopt -u interactive_comments; echo hi #; rm {V}`, "policy_denied"},
}

// TestBypassLinesDoNotRun: each bypass line, sent by an agent through
// ssh_exec to a real sshd and to a local sandboxed session under the
// README's example policy, waits for approval or is denied; nothing of it
// runs: the victim survives and no pwn file appears. An allowed line in
// the same session still runs.
func TestBypassLinesDoNotRun(t *testing.T) {
	targets := []struct {
		name   string
		params func(t *testing.T) map[string]any
	}{
		{"local", func(*testing.T) map[string]any { return map[string]any{} }},
		{"ssh", func(t *testing.T) map[string]any {
			d := testenv.SSHD(t)
			return map[string]any{"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile}
		}},
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			ws := t.TempDir()
			cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + bypassPolicy
			srv := startServer(t, serverOpts{config: cfg})
			params := tg.params(t)
			scratch := filepath.Join(ws, "scratch")
			victim := filepath.Join(scratch, "victim")
			if err := os.MkdirAll(filepath.Join(scratch, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			connect := func(name string) sess {
				p := map[string]any{"name": name}
				for k, v := range params {
					p[k] = v
				}
				return sess{srv, name, str(mustOK(t, srv.call(t, "ssh_connect", p))["sessionToken"])}
			}
			// A session of its own for allowed lines, so that no approval
			// left pending stands in front of them.
			ctl := connect("ctl")
			for i, bl := range bypassLines {
				pwn := filepath.Join(scratch, fmt.Sprintf("pwn%d", i))
				line := strings.NewReplacer("{P}", pwn, "{V}", victim, "{D}", scratch).Replace(bl.line)
				// A session per line, for the same reason.
				e := wantError(t, connect(fmt.Sprintf("b%d", i)).exec(t, line), bl.want)
				if bl.want == "approval_pending" && !strings.HasPrefix(str(e["approvalId"]), "apr_") {
					t.Errorf("%q: approval_pending without an approvalId: %v", line, e)
				}
				// What is allowed still runs, and the line's effects would
				// have shown by the time this answers.
				if r := result(t, ctl.exec(t, "echo still here")); r["stdout"] != "still here\n" {
					t.Errorf("%q: the allowed line after it: %v", line, r)
				}
				if _, err := os.Stat(pwn); err == nil {
					t.Errorf("%q ran: %s exists", line, pwn)
				}
				if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
					t.Fatalf("%q ran: the victim is gone or changed (%q, %v)", line, b, err)
				}
			}
			if b, err := os.ReadFile(filepath.Join(scratch, ".git", "config")); err == nil {
				t.Errorf(".git/config was written: %q", b)
			}
		})
	}
}
