package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestStatusStrip: the monitoring page's strip tells the story of the
// session in real Chromium. It shows who watches and that the agent is
// idle; a command the policy refuses, with its rule; a command that waits
// for approval, which the signed-in operator approves right there (the
// agent's repeat then runs it); and how many of the human's commands the
// agent will be told of before it acts, until it is told.
func TestStatusStrip(t *testing.T) {
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
	signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	strip := `document.getElementById('strip').hidden ? '' : document.getElementById('strip').innerText.replace(/\s+/g, ' ').trim()`
	waitPage(t, ctx, `String((`+strip+`).startsWith('Agent: idle') && (`+strip+`).includes('1 watching') && (`+strip+`).includes('you may type'))`, "true")

	wantError(t, s.exec(t, "rm -rf "+ws+"/nothing"), "policy_denied")
	waitPage(t, ctx, `String((`+strip+`).includes('Refused by the policy: rm -rf `+ws+`/nothing (rules[3] {command: "rm -rf *", decision: deny})'))`, "true")

	marker := filepath.Join(ws, "approved")
	e := wantError(t, s.exec(t, "touch "+marker), "approval_pending")
	waitPage(t, ctx, `String((`+strip+`).includes('Waiting for approval: touch `+marker+`') && (`+strip+`).includes('Agent: waiting for approval of touch'))`, "true")
	if err := chromedp.Do(ctx, chromedp.Click(`#strip-approvals li[data-id="`+str(e["approvalId"])+`"] button.approve`)); err != nil {
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
}
