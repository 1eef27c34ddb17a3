package main

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestRequestHuman: the hand-back end to end. The agent asks for the
// human (ssh_request_human); Chromium shows the request on the monitoring
// page; the human answers a prompt that does not echo with a secret, runs
// a second command, and clicks "Done, hand back" with a note. The agent's
// call returns the note and both commands, and the secret is in no reply,
// recording, audit record or log. The go-sdk client (protocol 2026-07-28)
// gets human_pending and repeats the call with its requestId; the
// TypeScript SDK's one call waits for the hand-back.
func TestRequestHuman(t *testing.T) {
	const ask = "Enter the deploy password at the prompt"
	for _, client := range []string{"go-sdk", "typescript"} {
		t.Run(client, func(t *testing.T) {
			pw := secret("pw-")
			var (
				srv     *tandemProc
				call    func(tool string, args map[string]any) map[string]any
				dataDir string
				logs    func() string
				stop    func()
			)
			switch client {
			case "go-sdk":
				srv = startServer(t, serverOpts{})
				call = func(tool string, args map[string]any) map[string]any { return srv.call(t, tool, args) }
				dataDir, logs = srv.dataDir, srv.log
				stop = func() { _ = srv.cs.Close() }
			default:
				dataDir = filepath.Join(t.TempDir(), "state")
				ts := startTSClient(t, "serve", "--web", "127.0.0.1:0", "--data-dir", dataDir)
				call = func(tool string, args map[string]any) map[string]any {
					return ts.mustDo(t, map[string]any{"op": "call", "tool": tool, "args": args}).Reply
				}
				logs = ts.log
				stop = func() {}
			}
			tok := str(mustOK(t, call("ssh_connect", map[string]any{"name": "hand"}))["sessionToken"])
			args := func(more map[string]any) map[string]any {
				more["sessionName"], more["sessionToken"] = "hand", tok
				return more
			}
			url := str(mustOK(t, call("ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])

			var reply map[string]any
			answered := make(chan struct{})
			if client == "go-sdk" {
				p := wantError(t, call("ssh_request_human", args(map[string]any{"message": ask, "waitSeconds": 1})), "human_pending")
				id := str(p["requestId"])
				if b := wantError(t, call("ssh_exec", args(map[string]any{"command": "echo agent"})), "session_busy"); b["reason"] != "human_requested" || b["requestId"] != id {
					t.Fatalf("the agent acts while the human holds the session: %v", b)
				}
				// The dashboard lists the session as needing the human.
				st := newOperatorClient(t, srv).do(t, http.MethodGet, "/api/state", "")
				if rows, _ := st["sessions"].([]any); len(rows) != 1 || rows[0].(map[string]any)["humanRequest"] != ask {
					t.Fatalf("the dashboard's sessions: %v", st["sessions"])
				}
				go func() {
					defer close(answered)
					for {
						r := call("ssh_request_human", args(map[string]any{"requestId": id, "waitSeconds": 5}))
						if r["error"] != "human_pending" {
							reply = r
							return
						}
					}
				}()
			} else {
				go func() {
					defer close(answered)
					reply = call("ssh_request_human", args(map[string]any{"message": ask}))
				}()
			}

			ctx := testenv.Browser(t)
			signIn(t, ctx, url, dataDirToken(t, dataDir))
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, `document.getElementById('request').hidden ? '' : document.getElementById('request-message').textContent`, ask)
			// A prompt that does not echo (as sudo's), then a second command.
			typeKeys(t, ctx, "read -rs -p 'Password: ' pw && echo \"got ${#pw} characters\"\r")
			// The prompt on a line of its own, not the typed line's half-drawn echo.
			waitScreen(t, ctx, func(s string) bool { return strings.HasSuffix(strings.TrimRight(s, " \n"), "\nPassword:") })
			typeKeys(t, ctx, pw+"\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "got 27 characters") })
			typeKeys(t, ctx, "echo second\r")
			waitScreen(t, ctx, func(s string) bool { return promptAfter(s, "second") })
			if err := chromedp.Do(ctx, chromedp.SendKeys("#request-note", "typed it"), chromedp.Click("#handback")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-answered:
			case <-time.After(60 * time.Second):
				t.Fatal("the agent's call did not answer after the hand-back")
			}
			r := mustOK(t, reply)
			cmds, _ := r["userCommands"].([]any)
			if r["note"] != "typed it" || r["userCommandCount"] != 2.0 || len(cmds) != 2 || !strings.HasPrefix(str(r["handedBackBy"]), "operator") {
				t.Fatalf("the hand-back: %v", r)
			}
			first, second := cmds[0].(map[string]any), cmds[1].(map[string]any)
			if !strings.HasPrefix(str(first["command"]), "read -rs -p") || !strings.Contains(str(first["stdout"]), "got 27 characters") || second["command"] != "echo second" {
				t.Fatalf("the human's commands: %v", cmds)
			}
			waitPage(t, ctx, `document.getElementById('request').hidden ? 'hidden' : 'shown'`, "hidden")
			if res := result(t, call("ssh_exec", args(map[string]any{"command": "echo agent"}))); res["stdout"] != "agent\n" {
				t.Fatalf("after the hand-back: %v", res)
			}
			mustOK(t, call("ssh_disconnect", args(map[string]any{})))
			// The ended session's page says why, and its link replays it.
			waitPage(t, ctx, `document.getElementById('status').textContent`, "session ended: disconnected")
			if err := chromedp.Do(ctx, chromedp.Click("#replay")); err != nil {
				t.Fatal(err)
			}
			waitPage(t, ctx, `document.querySelector('script[src$="replay.js"]') ? 'replay' : 'not yet'`, "replay")
			// The replay's seek bar marks the agent's commands and the human's apart.
			waitPage(t, ctx, `String([...document.querySelectorAll('#marks .mark')].some(m => m.dataset.source === 'human' && m.getAttribute('aria-label') === 'human: echo second') &&
				[...document.querySelectorAll('#marks .mark')].some(m => m.dataset.source === 'agent' && m.getAttribute('aria-label') === 'agent: echo agent'))`, "true")
			stop()

			if strings.Contains(logs(), pw) {
				t.Error("the secret is in tandem's log")
			}
			if strings.Contains(strings.Join(flatten(r), " "), pw) {
				t.Error("the secret is in the reply")
			}
			err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if strings.HasSuffix(p, ".cast") {
					b = append(b, castText(t, string(b))...) // keys come one event each
				}
				if bytes.Contains(b, []byte(pw)) {
					t.Errorf("the secret is in %s", p)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitPage waits until the page's expression js evaluates to want, as a
// person looking at the page would.
func waitPage(t *testing.T, ctx context.Context, js, want string) {
	t.Helper()
	var got string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var err error
		if got, err = chromedp.Run(ctx, chromedp.Evaluate[string](js)); err != nil {
			if navigating(err) {
				continue // the page is being replaced (a link was followed): ask the next one
			}
			t.Fatal(err)
		}
		if got == want {
			return
		}
	}
	t.Fatalf("the page shows %q, want %q", got, want)
}

// navigating reports whether an evaluation failed only because the page
// navigated under it: the old document's context went away before it
// answered, and the new one will answer the next time.
func navigating(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Inspected target navigated or closed") ||
		strings.Contains(msg, "Execution context was destroyed") ||
		strings.Contains(msg, "Cannot find context with specified id")
}

// flatten lists every string in a reply, nested ones included.
func flatten(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case map[string]any:
		var out []string
		for _, e := range v {
			out = append(out, flatten(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return nil
}
