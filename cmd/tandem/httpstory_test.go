package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestHTTPCoreStory: the TypeScript SDK (the client Claude Code, Cursor and
// VS Code are built on, protocol 2025-11-25) and the go-sdk client both
// connect over Streamable HTTP, run commands with exact streams, and meet
// the gate after a human typed in the browser.
func TestHTTPCoreStory(t *testing.T) {
	ws := t.TempDir()
	s := startHTTP(t, httpOpts{config: fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: %s}\n", ws)})
	type callFn func(t *testing.T, tool string, args map[string]any) map[string]any
	clients := []struct {
		name string
		open func(t *testing.T, token string) callFn
	}{
		{"typescript-sdk", func(t *testing.T, token string) callFn {
			c := startTSClientEnv(t, []string{"TANDEM_TOKEN=" + token}, "--http", s.url)
			return func(t *testing.T, tool string, args map[string]any) map[string]any {
				t.Helper()
				return c.mustDo(t, map[string]any{"op": "call", "tool": tool, "args": args}).Reply
			}
		}},
		{"go-sdk", func(t *testing.T, token string) callFn {
			c := s.client(t, token)
			return func(t *testing.T, tool string, args map[string]any) map[string]any {
				t.Helper()
				return c.Call(t, tool, args)
			}
		}},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			call := cl.open(t, s.token(t, "--tenant", "default", "--actor", cl.name))
			r := mustOK(t, call(t, "ssh_connect", map[string]any{"name": "story"}))
			sess := map[string]any{"sessionName": "story", "sessionToken": str(r["sessionToken"])}
			exec := func(cmd string) map[string]any {
				a := map[string]any{"command": cmd}
				for k, v := range sess {
					a[k] = v
				}
				return call(t, "ssh_exec", a)
			}
			res := result(t, exec("mkdir -p sub && cd sub; sh -c 'echo out; echo err >&2; exit 3'"))
			if res["stdout"] != "out\n" || res["stderr"] != "err\n" || res["exitCode"] != 3.0 || res["cwd"] != ws+"/sub" {
				t.Fatalf("streams: %v", res)
			}
			url := str(mustOK(t, call(t, "ssh_get_monitoring_url", sess))["monitoringUrl"])
			ctx := testenv.Browser(t)
			signIn(t, ctx, url, dataDirToken(t, s.dataDir))
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			waitScreen(t, ctx, func(s string) bool { return strings.Contains(s, "echo out") && promptAfter(s, "err") })
			owner, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("owner")?.textContent ?? ""`))
			if err != nil || owner != "default · "+cl.name {
				t.Errorf("the page names the owner %q (%v), want tenant and actor", owner, err)
			}
			typeKeys(t, ctx, "cd .. && echo human-"+cl.name+"\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "human-"+cl.name) })
			g := wantError(t, exec("pwd"), "user_activity_detected")
			cmds, _ := g["userCommands"].([]any)
			if len(cmds) != 1 || cmds[0].(map[string]any)["command"] != "cd .. && echo human-"+cl.name {
				t.Fatalf("gate: %v", g)
			}
			if res := result(t, exec("pwd")); res["stdout"] != ws+"\n" {
				t.Errorf("after the gate: %v", res)
			}
			mustOK(t, call(t, "ssh_disconnect", sess))
		})
	}
}
