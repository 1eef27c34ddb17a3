package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestHumanTouchReachesAgent: what a human does in the browser to the
// agent's running command reaches the agent on its next reply, locally and
// over SSH (issue 29 item 1). The agent's read -p times out; the human
// answers y in Chromium; the next call, a plain `true`, reports it with the
// command's id, and the call after says nothing more. A human answer while
// the agent's call is still open comes on that call's own reply. The keys
// are counted, never shown, and a prompt that hides them says so. The human's Ctrl-C
// on the agent's sleep 30, after its call returned, is reported the same
// way, and the command's read-back says a human interrupted it, and who.
// Every touch is in the audit.
func TestHumanTouchReachesAgent(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "touch"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			args := func(more map[string]any) map[string]any {
				more["sessionName"], more["sessionToken"] = "touch", tok
				return more
			}
			exec := func(command string, timeout float64) map[string]any {
				return srv.call(t, "ssh_exec", args(map[string]any{"command": command, "timeoutSeconds": timeout}))
			}
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
			ctx := testenv.Browser(t)
			signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			atPrompt := func(prompt string) func(string) bool {
				// The prompt follows the command line's echo, and may wrap.
				return func(s string) bool {
					return strings.HasSuffix(strings.TrimRight(strings.ReplaceAll(s, "\n", ""), " "), prompt)
				}
			}

			// After the call: the human answers the agent's prompt.
			r := wantError(t, exec(`read -r -p "Deploy to prod? [y/N] " answer; echo "answer=$answer"`, 1), "command_timeout")
			deploy := str(r["commandId"])
			if r["agentCommandTouched"] != nil {
				t.Fatalf("a touch reported before the human typed: %v", r)
			}
			waitScreen(t, ctx, atPrompt("Deploy to prod? [y/N]"))
			typeKeys(t, ctx, "y\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "answer=y") })
			r = mustOK(t, exec("true", 10))
			touch := oneTouch(t, r, deploy)
			if touch["by"] != "human" || !strings.HasPrefix(str(touch["viewer"]), "operator") || touch["keys"] != 2.0 || touch["enters"] != 1.0 ||
				touch["running"] != false || touch["exitCode"] != 0.0 || touch["interruptKey"] != nil || touch["masked"] != nil {
				t.Errorf("the human's answer: %v", touch)
			}
			if str(r["agentCommandTouchedHint"]) == "" {
				t.Errorf("no sentence explains agentCommandTouched: %v", r)
			}
			if r := mustOK(t, exec("true", 10)); r["agentCommandTouched"] != nil {
				t.Errorf("a touch told twice: %v", r)
			}
			back := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": deploy})))
			if back["data"] != "answer=y\n" || back["interruptedBy"] != nil {
				t.Errorf("read-back of the answered command: %v", back)
			}

			// During the call: the answer comes on the call's own reply; a
			// hidden answer is counted, never shown.
			for _, tc := range []struct {
				command, prompt, keys, want string
				masked                      bool
			}{
				{`read -r -p "Release name? " n; echo "name=$n"`, "Release name?", "v1.2\r", "name=v1.2\n", false},
				{`read -rs -p "Vault PIN: " p; echo; echo "pin=${#p}"`, "Vault PIN:", "s3cret-4711\r", "\npin=11\n", true},
			} {
				done := make(chan map[string]any, 1)
				go func() { done <- exec(tc.command, 60) }()
				waitScreen(t, ctx, atPrompt(tc.prompt))
				typeKeys(t, ctx, tc.keys)
				r := mustOK(t, <-done)
				if res := result(t, r); res["stdout"] != tc.want {
					t.Errorf("%s: %v", tc.command, res)
				}
				touch := oneTouch(t, r, str(r["commandId"]))
				if touch["keys"] != float64(len(tc.keys)) || touch["running"] != false {
					t.Errorf("%s: %v", tc.command, touch)
				}
				if touch["masked"] != map[bool]any{true: true, false: nil}[tc.masked] {
					t.Errorf("%s: masked wrong: %v", tc.command, touch)
				}
				if b, _ := json.Marshal(touch); strings.Contains(string(b), strings.TrimSuffix(tc.keys, "\r")) {
					t.Errorf("what the human typed is in the touch: %s", b)
				}
				if b, _ := json.Marshal(r); tc.masked && strings.Contains(string(b), "s3cret") {
					t.Errorf("the hidden answer is in the reply: %s", b)
				}
			}

			// Ctrl-C after the call returned.
			r = wantError(t, exec("sleep 30", 1), "command_timeout")
			sleep := str(r["commandId"])
			waitScreen(t, ctx, atPrompt("sleep 30"))
			if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")),
				chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl))); err != nil {
				t.Fatal(err)
			}
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "^C") })
			r = exec("true", 10) // the very next call tells it, whatever it answers
			touch = oneTouch(t, r, sleep)
			if touch["interruptedBy"] != "human" || touch["interruptKey"] != "Ctrl-C" || touch["keys"] != 1.0 ||
				!strings.HasPrefix(str(touch["viewer"]), "operator") {
				t.Errorf("the human's Ctrl-C: %v", touch)
			}
			back = mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": sleep})))
			if back["running"] != false || back["exitCode"] != 130.0 || back["interruptedBy"] != "human" ||
				back["interruptKey"] != "Ctrl-C" || back["interruptViewer"] != touch["viewer"] {
				t.Errorf("read-back of the interrupted command: %v", back)
			}

			// The human interrupts the agent's command and ends the shell:
			// the session_ended reply still tells it.
			r = wantError(t, exec("sleep 30", 1), "command_timeout")
			last := str(r["commandId"])
			if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")),
				chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl))); err != nil {
				t.Fatal(err)
			}
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "^C") })
			typeKeys(t, ctx, "exit\r")
			waitPage(t, ctx, `document.getElementById('status').dataset.state`, "ended")
			r = wantError(t, exec("true", 10), "session_ended")
			if touch := oneTouch(t, r, last); touch["interruptKey"] != "Ctrl-C" || touch["exitCode"] != 130.0 {
				t.Errorf("the Ctrl-C before the end: %v", touch)
			}

			audit, err := tandemCLI(t, "audit", "tail", "--data-dir", srv.dataDir, "--json", "-n", "1000")
			if err != nil {
				t.Fatalf("audit tail: %v\n%s", err, audit)
			}
			touched := 0
			for _, line := range strings.Split(audit, "\n") {
				if strings.Contains(line, `"command_touched"`) {
					touched++
					if strings.Contains(line, "s3cret") || strings.Contains(line, "v1.2") {
						t.Errorf("what the human typed is in the audit: %s", line)
					}
				}
			}
			if touched != 5 || !strings.Contains(audit, deploy) || !strings.Contains(audit, sleep) || !strings.Contains(audit, last) {
				t.Errorf("the audit has %d command_touched records, want 5:\n%s", touched, lastN(audit, 4000))
			}
		})
	}
}

// oneTouch is the one agentCommandTouched entry of r, which must be for
// the command id.
func oneTouch(t *testing.T, r map[string]any, id string) map[string]any {
	t.Helper()
	list, _ := r["agentCommandTouched"].([]any)
	if len(list) != 1 {
		t.Fatalf("want one agentCommandTouched entry, got: %v", r)
	}
	touch, _ := list[0].(map[string]any)
	if touch["commandId"] != id {
		t.Fatalf("touch of %v, want %s: %v", touch["commandId"], id, r)
	}
	return touch
}
