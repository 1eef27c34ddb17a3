package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// storyTarget is one place the seed's story runs: a real sshd or the local
// sandbox.
type storyTarget struct {
	name    string
	connect func(t *testing.T) (*tandemProc, map[string]any)
}

func storyTargets() []storyTarget {
	return []storyTarget{
		{"local", func(t *testing.T) (*tandemProc, map[string]any) {
			return startServer(t, serverOpts{}), map[string]any{}
		}},
		{"ssh", func(t *testing.T) (*tandemProc, map[string]any) {
			d := testenv.SSHD(t)
			return startServer(t, serverOpts{}), map[string]any{
				"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile,
			}
		}},
	}
}

func TestStory(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "story"
			r := mustOK(t, srv.call(t, "ssh_connect", params))
			tok := str(r["sessionToken"])
			if len(tok) < 22 || r["message"] != "Session created. Use sessionToken for all subsequent commands." {
				t.Fatalf("connect reply: %v", r)
			}
			conn := r["connection"].(map[string]any)
			if conn["name"] != "story" || conn["kind"] != tg.name || conn["status"] != "active" {
				t.Errorf("connection: %v", conn)
			}

			// Missing or wrong token: the exact reply, and nothing runs.
			marker := filepath.Join(srv.home, "must-not-exist")
			for _, bad := range []map[string]any{
				{"sessionName": "story", "command": "touch " + marker},
				{"sessionName": "story", "sessionToken": "wrong", "command": "touch " + marker},
				{"sessionName": "story", "sessionToken": tok + "x", "command": "touch " + marker},
			} {
				e := wantError(t, srv.call(t, "ssh_exec", bad), "invalid_session_token")
				if e["message"] != "Invalid or missing session token for session 'story'" || !contains(str(e["hint"]), `"sessionToken"`) {
					t.Errorf("token refusal: %v", e)
				}
			}
			exec := func(cmd string) map[string]any {
				return srv.call(t, "ssh_exec", map[string]any{"sessionName": "story", "sessionToken": tok, "command": cmd})
			}
			if res := result(t, exec("ls "+marker+" 2>&1; echo done")); !contains(str(res["stdout"]), "No such file") {
				t.Errorf("a refused call ran: %v", res)
			}

			mustOK(t, exec("cd /tmp && export A=1"))
			if res := result(t, exec("pwd; echo $A")); res["stdout"] != "/tmp\n1\n" || res["cwd"] != "/tmp" {
				t.Errorf("state did not persist: %v", res)
			}
			res := result(t, exec("sh -c 'echo out; echo err >&2; exit 3'"))
			if res["stdout"] != "out\n" || res["stderr"] != "err\n" || res["exitCode"] != 3.0 {
				t.Errorf("streams: %v", res)
			}
			if _, ok := res["durationMs"].(float64); !ok {
				t.Errorf("no durationMs: %v", res)
			}

			// A human in the browser sees the agent's work and types.
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "story", "sessionToken": tok}))["monitoringUrl"])
			if !strings.HasPrefix(url, "http://127.0.0.1:") {
				t.Fatalf("monitoring url %q", url)
			}
			ctx := testenv.Browser(t)
			signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			screen := waitScreen(t, ctx, func(s string) bool { return contains(s, "out") && contains(s, "err") && contains(s, "/tmp") })
			if !contains(screen, "echo out; echo err") {
				t.Errorf("the agent's command line was not shown to the human:\n%s", screen)
			}
			typeKeys(t, ctx, "cd /var && echo hi\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "echo hi") })
			typeKeys(t, ctx, "false\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "false") })

			g := wantError(t, exec("pwd"), "user_activity_detected")
			if g["message"] != "User commands executed since last MCP command. Review activity and retry." {
				t.Errorf("gate message: %v", g["message"])
			}
			cmds, _ := g["userCommands"].([]any)
			if len(cmds) != 2 {
				t.Fatalf("want 2 user commands, got %v", g["userCommands"])
			}
			first, second := cmds[0].(map[string]any), cmds[1].(map[string]any)
			if first["command"] != "cd /var && echo hi" || first["exitCode"] != 0.0 || !contains(str(first["stdout"]), "hi") {
				t.Errorf("first user command: %v", first)
			}
			if second["command"] != "false" || second["exitCode"] != 1.0 {
				t.Errorf("second user command: %v", second)
			}
			for _, c := range []map[string]any{first, second} {
				if _, err := time.Parse(time.RFC3339Nano, str(c["timestamp"])); err != nil {
					t.Errorf("timestamp %v: %v", c["timestamp"], err)
				}
				if d, ok := c["duration"].(float64); !ok || d < 0 {
					t.Errorf("duration %v", c["duration"])
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, str(g["userActivitySince"])); err != nil {
				t.Errorf("userActivitySince: %v", err)
			}
			if res := result(t, exec("pwd")); res["stdout"] != "/var\n" {
				t.Errorf("after the gate: %v", res)
			}
			mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": "story", "sessionToken": tok}))
			if l := mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{})); len(l["sessions"].([]any)) != 0 {
				t.Errorf("session still listed after disconnect: %v", l)
			}
		})
	}
}

// promptAfter reports whether the screen shows line followed by a new prompt.
func promptAfter(screen, line string) bool {
	i := strings.LastIndex(screen, line)
	if i < 0 {
		return false
	}
	rest := strings.TrimRight(screen[i+len(line):], " \n")
	return strings.HasSuffix(rest, "#") || strings.HasSuffix(rest, "$")
}

// waitScreen polls the browser terminal's text until ok accepts it.
func waitScreen(t *testing.T, ctx context.Context, ok func(string) bool) string {
	t.Helper()
	var text string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.tandem ? window.tandem.text() : ""`))
		if err != nil {
			t.Fatal(err)
		}
		text = got
		if ok(text) {
			return text
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("browser terminal never showed what was expected; it shows:\n%s", text)
	return ""
}

func typeKeys(t *testing.T, ctx context.Context, keys string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Focus(chromedp.CSS(".xterm-helper-textarea")), testenv.TypeKeys(keys)); err != nil {
		t.Fatal(err)
	}
}
