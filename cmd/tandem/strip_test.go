package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestStatusStrip: the monitoring page's strip tells the story of the
// session in real Chromium, at 1280×800 and at a phone's 420 px. It shows
// who watches and that the agent is idle; a command the policy refuses,
// with its rule; a command that waits for approval, which the signed-in
// operator approves right there (on the phone with a 44 px button; the
// agent's repeat then runs it); how many of the human's commands the
// agent will be told of before it acts, until it is told; and each
// command's line marked by its source and a failed one by its exit code.
// A screenshot goes to the test's artifact directory.
func TestStatusStrip(t *testing.T) {
	for _, vp := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 420, 800}} {
		t.Run(vp.name, func(t *testing.T) { statusStrip(t, vp.w, vp.h) })
	}
}

func statusStrip(t *testing.T, width, height int64) {
	ws := t.TempDir()
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + `policy:
  mode: ask
  rules:
    - {tool: ssh_connect, decision: allow}
    - {tool: ssh_disconnect, decision: allow}
    - {command: "echo *", decision: allow}
    - {command: "rm -rf *", decision: deny}
approvals: {waitSeconds: 1, timeoutSeconds: 300}
`
	srv := startServer(t, serverOpts{config: cfg})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "strip"}))["sessionToken"])
	s := sess{srv, "strip", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "strip", "sessionToken": tok}))["monitoringUrl"])
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	strip := `document.getElementById('strip').hidden ? '' : document.getElementById('strip').innerText.replace(/\s+/g, ' ').trim()`
	waitPage(t, ctx, `String((`+strip+`).startsWith('Agent: idle') && (`+strip+`).includes('1 watching: operator') && (`+strip+`).includes('you may type'))`, "true")
	// A second viewer, who may only watch, is named by kind.
	wctx, cancel := context.WithCancel(context.Background())
	watcher, _, err := websocket.Dial(wctx, "ws"+strings.TrimPrefix(url, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {strings.SplitN(url, "/s/", 2)[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { // a viewer reads what it is sent
		for {
			if _, _, err := watcher.Read(wctx); err != nil {
				return
			}
		}
	}()
	waitPage(t, ctx, `String((`+strip+`).includes('2 watching: browser (watching), operator'))`, "true")
	watcher.CloseNow()
	cancel()
	waitPage(t, ctx, `String((`+strip+`).includes('1 watching: operator'))`, "true")

	wantError(t, s.exec(t, "rm -rf "+ws+"/nothing"), "policy_denied")
	waitPage(t, ctx, `String((`+strip+`).includes('Refused by the policy: rm -rf `+ws+`/nothing (rules[3] {command: "rm -rf *", decision: deny})'))`, "true")

	marker := filepath.Join(ws, "approved")
	e := wantError(t, s.exec(t, "touch "+marker), "approval_pending")
	waitPage(t, ctx, `String((`+strip+`).includes('Waiting for approval: touch `+marker+`') && (`+strip+`).includes('Agent: waiting for approval of touch'))`, "true")
	approve := `#strip-approvals li[data-id="` + str(e["approvalId"]) + `"] button.approve`
	if width < 600 { // a thumb's size on a phone
		h, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('`+approve+`').getBoundingClientRect().height`))
		if err != nil || h < 44 {
			t.Errorf("the strip's Approve is %v px high (%v); want at least 44", h, err)
		}
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "monitoring-page-approval.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(approve)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `String(document.querySelectorAll('#strip-approvals li').length)`, "0")
	mustOK(t, s.exec(t, "touch "+marker))
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the command approved on the monitoring page did not run: %v", err)
	}

	typeKeys(t, ctx, "echo from-human\r")
	waitPage(t, ctx, `String((`+strip+`).includes('1 of your commands will be reported to the agent before it acts'))`, "true")
	g := wantError(t, s.exec(t, "echo agent"), "user_activity_detected")
	if !strings.Contains(str(g["message"]), "User commands") {
		t.Fatalf("gate: %v", g)
	}
	waitPage(t, ctx, `String(document.getElementById('gate').hidden)`, "true")

	// Each command's line is marked by its source, and a failed one by its
	// exit code, in the live terminal.
	typeKeys(t, ctx, "false\r")
	// As a person would: the agent acts once the strip says the command
	// ended and waits to be reported (before that, the agent's call is
	// session_busy: the human's command still runs).
	waitPage(t, ctx, `String((`+strip+`).includes('1 of your commands will be reported to the agent before it acts'))`, "true")
	g = wantError(t, s.exec(t, "echo agent"), "user_activity_detected")
	if n := g["userCommandCount"]; n != 1.0 {
		t.Fatalf("gate after false: %v", g)
	}
	mustOK(t, s.exec(t, "echo agent-mark"))
	hasMark := func(source, command string, exit int) string {
		return fmt.Sprintf(`window.tandem.marks().some(m => m.source === %q && m.command === %q && m.exit === %d)`, source, command, exit)
	}
	waitPage(t, ctx, `String(`+hasMark("agent", "echo agent-mark", 0)+` && `+hasMark("human", "false", 1)+` && `+hasMark("human", "echo from-human", 0)+`)`, "true")
	shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "monitoring-page-marks.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	shows, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll('.cmd-mark.human.failed')].length >= 1 && [...document.querySelectorAll('.cmd-mark.agent')].length >= 1`))
	if err != nil || !shows {
		t.Errorf("the marks are not drawn (%v)", err)
	}
}

// stripShows waits until the monitoring page's status strip, as its
// WebSocket sends it to the operator's browser, holds want.
func stripShows(t *testing.T, monitorURL, token, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(monitorURL, "http")+"/ws", &websocket.DialOptions{HTTPHeader: operatorHeader(monitorURL, token)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	var last string
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("the strip never showed %q: %v; the last status: %s", want, err, last)
		}
		if typ == websocket.MessageText && strings.HasPrefix(string(p), `{"t":"s"`) {
			if last = string(p); strings.Contains(last, want) {
				return
			}
		}
	}
}
