package main

import (
	"context"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// settleBound is how soon a call must answer for a command that waits for
// input or shows a full screen (issue 29: a [y/N] prompt cost the whole
// timeoutSeconds).
const settleBound = 3 * time.Second

// rawPrompt reads one key in raw mode, as inquirer-style prompts do.
const rawPrompt = `node -e 'process.stdout.write("Pick a color (r/g/b): "); process.stdin.setRawMode(true); ` +
	`process.stdin.once("data", d => { process.stdin.setRawMode(false); console.log("picked " + d); process.exit(0) })'`

// TestWaitingAnswersAtOnce: through the real binary and a real MCP client,
// locally and over a real sshd, ssh_exec with timeoutSeconds 50 answers
// command_timeout with waitingForInput (or fullScreen) within 3 s (plus
// the program's own start) for a command at a canonical prompt (read -p),
// a raw-mode prompt (node), npm init's prompt, or on the alternate screen,
// and the answer reaches it; a
// command that prints without a newline and then sleeps or computes, in
// canonical or raw mode, is not reported early; ssh_read_output's
// waitSeconds on a waiting command returns within 3 s too.
func TestWaitingAnswersAtOnce(t *testing.T) {
	waiting := []struct {
		name, cmd, lastLine string
		// start runs first: the time it takes is the program's own start,
		// added to the bound (node and npm take seconds on a loaded machine).
		start        string
		full         bool
		answer, want string // typed (with submit for read -p); then stdout holds want
	}{
		{"read -p", `read -p "Continue? [y/N] " a; echo "answer=$a"`, "Continue? [y/N] ", "", false, "y", "answer=y\n"},
		{"raw mode", rawPrompt, "Pick a color (r/g/b): ", "node -e 0", false, "g", "picked g"},
		{"npm init", `cd "$(mktemp -d)" && npm init`, "package name:", "npm --version", false, "", ""},
		{"full screen", `python3 -c 'import sys, time; sys.stdout.write("\x1b[?1049hmenu"); sys.stdout.flush(); time.sleep(60)'`, "", "python3 -c 0", true, "", ""},
	}
	busy := []struct{ name, cmd, stdout string }{
		{"sleeps", `printf working...; sleep 4; echo done`, "working...done\n"},
		{"computes", `printf working...; end=$((SECONDS+3)); while [ $SECONDS -lt $end ]; do :; done; echo done`, "working...done\n"},
		{"raw mode, not reading", `node -e 'process.stdin.setRawMode(true); process.stdout.write("computing..."); ` +
			`setTimeout(() => { process.stdin.setRawMode(false); console.log("done") }, 3000)'`, "computing...done\n"},
	}
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv, params := tg.connect(t)
			params["name"] = "waits"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			call := func(tool string, args map[string]any) map[string]any {
				args["sessionName"], args["sessionToken"] = "waits", tok
				return srv.call(t, tool, args)
			}
			for _, w := range waiting {
				bound := settleBound
				if w.start != "" {
					start := time.Now()
					mustOK(t, call("ssh_exec", map[string]any{"command": w.start}))
					bound += time.Since(start)
				}
				start := time.Now()
				r := wantError(t, call("ssh_exec", map[string]any{"command": w.cmd, "timeoutSeconds": 50}), "command_timeout")
				took := time.Since(start)
				switch {
				case took > bound:
					t.Errorf("%s: answered after %v; want within %v: %v", w.name, took, bound, r)
				case r["running"] != true || str(r["commandId"]) == "" || r["partial"] == nil:
					t.Errorf("%s: not a running command's reply: %v", w.name, r)
				case w.full && r["fullScreen"] != true:
					t.Errorf("%s: fullScreen %v: %v", w.name, r["fullScreen"], r)
				case !w.full && r["waitingForInput"] != true:
					t.Errorf("%s: waitingForInput %v: %v", w.name, r["waitingForInput"], r)
				case !strings.Contains(str(r["lastLine"]), w.lastLine):
					t.Errorf("%s: lastLine %q; want %q", w.name, r["lastLine"], w.lastLine)
				}
				id := r["commandId"]
				if w.name == "read -p" {
					// A read that waits for more output returns as soon.
					start = time.Now()
					rr := mustOK(t, call("ssh_read_output", map[string]any{"commandId": id, "offset": 0, "waitSeconds": 30}))
					if took := time.Since(start); took > settleBound || rr["running"] != true || rr["waitingForInput"] != true {
						t.Errorf("ssh_read_output waitSeconds 30 on a waiting command: %v after %v", rr, took)
					}
				}
				if w.answer == "" {
					mustOK(t, call("ssh_cancel", map[string]any{}))
					continue
				}
				r = mustOK(t, call("ssh_send_input", map[string]any{"commandId": id, "input": w.answer, "submit": w.name == "read -p", "waitSeconds": 10}))
				if r["running"] != false {
					t.Fatalf("%s: still running after the answer: %v", w.name, r)
				}
				out := mustOK(t, call("ssh_read_output", map[string]any{"commandId": id}))
				if !strings.Contains(str(out["data"]), w.want) {
					t.Errorf("%s: stdout %q; want %q", w.name, out["data"], w.want)
				}
			}
			// The audit says why the call answered before its timeout.
			why := map[string]bool{}
			for _, rec := range auditJSON(t, srv.dataDir) {
				if rec.Tool == "ssh_exec" && rec.Outcome == "command_timeout" {
					why[rec.Reason[strings.Index(rec.Reason, ":")+1:]] = true
				}
			}
			if !why[" still running, waiting for input on its terminal"] || !why[" still running, a full-screen program shows"] {
				t.Errorf("the audit's reasons for the early answers: %v", why)
			}
			for _, b := range busy {
				start := time.Now()
				r := call("ssh_exec", map[string]any{"command": b.cmd, "timeoutSeconds": 50})
				if r["success"] != true {
					t.Errorf("%s: reported before it ended, after %v: %v", b.name, time.Since(start), r)
					mustOK(t, call("ssh_cancel", map[string]any{}))
					continue
				}
				if res := result(t, r); res["stdout"] != b.stdout {
					t.Errorf("%s: stdout %q; want %q", b.name, res["stdout"], b.stdout)
				}
			}
		})
	}
}

// TestTimeoutNote: timeoutSeconds above 55 is accepted, and the reply
// notes that common clients give up at 60 s; 50 carries no note.
func TestTimeoutNote(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "note"}))["sessionToken"])
	tests := []struct {
		timeout float64
		cmd     string
		code    string // "" for success
		note    bool
	}{
		{120, "echo hi", "", true},
		{50, "echo hi", "", false},
		{55, "echo hi", "", false},
		{56, `read -p "Go? " x`, "command_timeout", true},
	}
	for _, tc := range tests {
		r := srv.call(t, "ssh_exec", map[string]any{"sessionName": "note", "sessionToken": tok, "command": tc.cmd, "timeoutSeconds": tc.timeout})
		if tc.code == "" {
			mustOK(t, r)
		} else {
			wantError(t, r, tc.code)
			mustOK(t, srv.call(t, "ssh_cancel", map[string]any{"sessionName": "note", "sessionToken": tok}))
		}
		note := str(r["timeoutNote"])
		if tc.note != (note != "") || (tc.note && !strings.Contains(note, "60 s")) {
			t.Errorf("timeoutSeconds %g: timeoutNote %q", tc.timeout, note)
		}
	}
}

// TestWaitingAfterApproval: a command whose program waited for the
// client's approval and then waits at a prompt answers command_timeout
// with waitingForInput within seconds of the prompt, not at its timeout.
func TestWaitingAfterApproval(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	cfg := gitPushPolicy(ws, "ask", "", "approvals: {waitSeconds: 50, timeoutSeconds: 300}\n")
	srv := startServer(t, serverOpts{config: cfg, elicit: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
	}})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "g"}))["sessionToken"])
	start := time.Now()
	r := wantError(t, sess{srv, "g", tok}.exec(t, "cd "+repo+" && ./push.sh && read -p 'Pushed. Deploy? [y/N] ' x", 50), "command_timeout")
	if took := time.Since(start); took > 10*time.Second || r["waitingForInput"] != true || r["lastLine"] != "Pushed. Deploy? [y/N] " {
		t.Errorf("after %v: %v", took, r)
	}
}
