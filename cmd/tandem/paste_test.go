package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// pasted is line i of a human paste, and the exit code it must report.
func pasted(i int) (string, int) {
	switch i % 4 {
	case 0:
		return fmt.Sprintf("/bin/echo p%d", i), 0
	case 1:
		return fmt.Sprintf("echo q%d", i), 0
	case 2:
		return fmt.Sprintf("(exit %d)", i%5), i % 5
	}
	return fmt.Sprintf("sh -c 'exit %d'", 1+i%3), 1 + i%3
}

// pasteText is lines from..to-1 of a paste, each ended by an Enter.
func pasteText(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		l, _ := pasted(i)
		b.WriteString(l + "\r")
	}
	return b.String()
}

// wsViewer is a browser's terminal connection, as the page makes it.
type wsViewer struct {
	c   *websocket.Conn
	ctx context.Context

	mu     sync.Mutex
	screen strings.Builder // what the terminal showed
}

// waitFor waits until the terminal has shown s n times, as a person
// watching would.
func (v *wsViewer) waitFor(t testing.TB, s string, n int) {
	t.Helper()
	waitUntil(t, func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		return strings.Count(v.screen.String(), s) >= n
	})
}

func openViewer(t testing.TB, monitorURL, token string) *wsViewer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ws := "ws" + strings.TrimPrefix(monitorURL, "http") + "/ws"
	c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: operatorHeader(monitorURL, token)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(64 << 20)
	t.Cleanup(func() { c.CloseNow() })
	v := &wsViewer{c: c, ctx: ctx}
	go func() { // a browser reads everything the terminal shows
		for {
			typ, p, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ != websocket.MessageBinary {
				continue // the page's status strip and requests, not the terminal
			}
			v.mu.Lock()
			v.screen.Write(p)
			v.mu.Unlock()
		}
	}()
	return v
}

// paste sends text as the page does: input messages of at most 8,192
// characters, one after another.
func (v *wsViewer) paste(t testing.TB, text string) {
	t.Helper()
	for i := 0; i < len(text); i += 8192 {
		msg, _ := json.Marshal(map[string]string{"t": "i", "d": text[i:min(len(text), i+8192)]})
		if err := v.c.Write(v.ctx, websocket.MessageText, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// humanReport gathers what the gate reports of the human's commands, over
// as many replies as it takes, until want commands are in: the listed
// ones, and those a reply leaves out, from its historyId. Every reply
// must stay within budget.
func humanReport(t *testing.T, exec func(string) map[string]any, read func(id string, off int) map[string]any, want, budget int) []map[string]any {
	t.Helper()
	var got []map[string]any
	deadline := time.Now().Add(3 * time.Minute)
	var last map[string]any
	for len(got) < want {
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes %d of %d human commands were reported; the last answer: %v", len(got), want, last)
		}
		r := exec("true")
		last = r
		switch r["error"] {
		case "user_activity_detected":
		case "session_busy", nil:
			time.Sleep(50 * time.Millisecond)
			continue
		default:
			t.Fatalf("while the paste runs: %v", r)
		}
		cmds, _ := r["userCommands"].([]any)
		if raw, _ := json.Marshal(cmds); budget > 0 && len(raw) > budget {
			t.Errorf("a report of %d bytes, over the %d budget", len(raw), budget)
		}
		if r["historyId"] == nil {
			for _, c := range cmds {
				got = append(got, c.(map[string]any))
			}
			continue
		}
		var text strings.Builder
		for off := 0; ; {
			o := read(str(r["historyId"]), off)
			text.WriteString(str(o["data"]))
			if o["eof"] == true {
				break
			}
			off = int(o["offset"].(float64) + o["bytes"].(float64))
		}
		dec := json.NewDecoder(strings.NewReader(text.String()))
		for dec.More() {
			var e map[string]any
			if err := dec.Decode(&e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
	}
	return got
}

// checkPaste checks that commands are lines from..from+n of the paste, in
// order, with their exit codes.
func checkPaste(t *testing.T, what string, got []map[string]any, from, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("%s: %d commands reported, want %d", what, len(got), n)
	}
	for i, c := range got {
		line, exit := pasted(from + i)
		if c["command"] != line || c["exitCode"] != float64(exit) || c["unattributed"] == true {
			t.Fatalf("%s: command %d is %v, want %q exit %d", what, i, c, line, exit)
		}
	}
}

// TestPasteReachesTheAgent: humans paste 300 and 2,000 lines through the
// WebSocket while the agent's command runs (type-ahead), and while it
// prints a flood; every line runs and comes back to the agent as its own
// command, in order, with its exit code, within the reply budget; locally
// and over SSH (issue 18: a 300-line paste reported 64).
func TestPasteReachesTheAgent(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv, params := tg.connect(t)
			params["name"] = "paste"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			exec := func(cmd string) map[string]any {
				return srv.call(t, "ssh_exec", map[string]any{"sessionName": "paste", "sessionToken": tok, "command": cmd})
			}
			read := func(id string, off int) map[string]any {
				return mustOK(t, srv.call(t, "ssh_read_output", map[string]any{"sessionName": "paste", "sessionToken": tok, "commandId": id, "offset": off}))
			}
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "paste", "sessionToken": tok}))["monitoringUrl"])
			v := openViewer(t, url, dataDirToken(t, srv.dataDir))
			from, runs := 0, map[string]int{}
			for _, tc := range []struct {
				n     int
				agent string // runs while the human pastes
			}{
				{300, "sleep 1; echo agent-done"},
				{2000, "sleep 1; echo agent-done"},
				{300, "seq 1 1000000 | head -c 5000000; sleep 0.5"},
			} {
				var wg sync.WaitGroup
				wg.Add(1)
				var agent map[string]any
				go func() {
					defer wg.Done()
					agent = exec(tc.agent)
				}()
				runs[tc.agent]++
				v.waitFor(t, tc.agent, runs[tc.agent]) // its line shows: it runs
				v.paste(t, pasteText(from, from+tc.n))
				wg.Wait()
				if agent["success"] != true {
					t.Fatalf("the agent's command: %v", agent)
				}
				what := fmt.Sprintf("%d lines during %q", tc.n, tc.agent)
				checkPaste(t, what, humanReport(t, exec, read, tc.n, 32<<10), from, tc.n)
				from += tc.n
			}
			if res := result(t, exec("echo after")); res["stdout"] != "after\n" {
				t.Errorf("after the pastes: %v", res)
			}
			// Every human command is in the audit chain too, with who typed it.
			waitUntil(t, func() bool {
				n := 0
				for _, r := range auditJSON(t, srv.dataDir) {
					var a map[string]any
					_ = json.Unmarshal(r.Args, &a)
					if r.Event == "human_command" && r.SessionName == "paste" && a["source"] == "human" &&
						strings.HasPrefix(str(a["viewer"]), "operator 127.0.0.1:") && a["commandId"] != nil {
						n++
					}
				}
				return n == from
			})
		})
	}
}

// waitUntil polls ok for up to 20 s.
func waitUntil(t testing.TB, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestBrowserPaste: a paste into the browser page itself (xterm.js, the
// paste event a person's Ctrl-V makes). At the prompt it arrives as one
// bracketed paste: one command carrying every line and every line's
// output. While the agent's command runs it arrives as typed-ahead lines
// (300, then 2,000): each its own command. Locally and over SSH.
func TestBrowserPaste(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "browser"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			exec := func(cmd string) map[string]any {
				return srv.call(t, "ssh_exec", map[string]any{"sessionName": "browser", "sessionToken": tok, "command": cmd})
			}
			read := func(id string, off int) map[string]any {
				return mustOK(t, srv.call(t, "ssh_read_output", map[string]any{"sessionName": "browser", "sessionToken": tok, "commandId": id, "offset": off}))
			}
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "browser", "sessionToken": tok}))["monitoringUrl"])
			ctx := testenv.Browser(t)
			signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
			if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
				t.Fatal(err)
			}
			waitScreen(t, ctx, func(s string) bool {
				return strings.HasSuffix(strings.TrimRight(s, " \n"), "#") || strings.HasSuffix(strings.TrimRight(s, " \n"), "$")
			})
			paste := func(text string) {
				t.Helper()
				js := `(function(text){const dt = new DataTransfer(); dt.setData('text/plain', text);
					document.querySelector('.xterm-helper-textarea').dispatchEvent(new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})); return true})(` + quoteJS(text) + `)`
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
					t.Fatal(err)
				}
			}

			// At the prompt: one bracketed paste, then Enter.
			lines := make([]string, 300)
			for i := range lines {
				lines[i] = fmt.Sprintf("echo b%d", i)
			}
			paste(strings.Join(lines, "\n") + "\n")
			typeKeys(t, ctx, "\r")
			got := humanReport(t, exec, read, 1, 32<<10)
			if got[0]["command"] != strings.Join(lines, "\n") {
				t.Errorf("the bracketed paste's command is %.200q…", got[0]["command"])
			}
			out := mcpReadAll(t, read, str(got[0]["commandId"]))
			for i := range lines {
				if !strings.Contains(out, fmt.Sprintf("b%d\n", i)) {
					t.Fatalf("the bracketed paste's output lacks line %d", i)
				}
			}

			// While the agent's command runs: typed-ahead lines. The command
			// runs until the paste has reached the terminal: under load, a
			// fixed sleep could end first, and a paste at the prompt is one
			// bracketed paste.
			cwd := strings.TrimSpace(str(result(t, exec("pwd"))["stdout"]))
			from := 0
			for run, n := range []int{300, 2000} {
				// The SSH user's home outlives the test: a name of its own.
				flag := filepath.Join(cwd, fmt.Sprintf("paste-go-%d-%d", run, time.Now().UnixNano()))
				t.Cleanup(func() { _ = os.Remove(flag) })
				agent := fmt.Sprintf("until [ -e %s ]; do sleep 0.05; done; echo agent-done-%d", flag, run)
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { defer wg.Done(); mustOK(t, exec(agent)) }()
				// The prompt holds the workspace's path: the line may wrap.
				waitScreen(t, ctx, func(s string) bool { return strings.Contains(strings.ReplaceAll(s, "\n", ""), agent) })
				// Running, not staged: bash turned bracketed paste off.
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					on, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.tandem.term.modes.bracketedPasteMode`))
					if err != nil {
						t.Fatal(err)
					}
					if !on {
						break
					}
					if time.Now().After(deadline) {
						t.Fatal("the agent's command never started")
					}
				}
				paste(strings.ReplaceAll(pasteText(from, from+n), "\r", "\n"))
				first, _ := pasted(from)
				waitScreen(t, ctx, func(s string) bool { return strings.Contains(s, first) })
				if err := os.WriteFile(flag, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				wg.Wait()
				checkPaste(t, fmt.Sprintf("a page paste of %d lines while the agent's command ran", n), humanReport(t, exec, read, n, 32<<10), from, n)
				from += n
			}
		})
	}
}

// mcpReadAll reads a command's whole stdout with ssh_read_output.
func mcpReadAll(t *testing.T, read func(id string, off int) map[string]any, id string) string {
	t.Helper()
	var b strings.Builder
	for off := 0; ; {
		o := read(id, off)
		b.WriteString(str(o["data"]))
		if o["eof"] == true {
			return b.String()
		}
		off = int(o["offset"].(float64) + o["bytes"].(float64))
	}
}

// quoteJS is s as a JavaScript string literal.
func quoteJS(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
