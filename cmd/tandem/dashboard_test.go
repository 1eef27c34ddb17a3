package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

var dashboardRE = regexp.MustCompile(`tandem: dashboard (\S+)`)

// TestDashboardDecidesAgentCalls: an agent's call waits on the policy; the
// operator approves it, then denies another, from the dashboard in
// headless Chromium, and each call answers within a second of the click.
// The denied command never reaches the shell or its recording.
func TestDashboardDecidesAgentCalls(t *testing.T) {
	// A long wait: only the dashboard's answer can end the call.
	cfg := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
	srv := startServer(t, serverOpts{config: cfg})
	m := dashboardRE.FindStringSubmatch(srv.log())
	if m == nil {
		t.Fatalf("tandem printed no dashboard link: %s", srv.log())
	}
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "dash"}))["sessionToken"])
	s := sess{srv, "dash", tok}

	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(m[1]), chromedp.WaitVisible(`#pending-empty`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`//table[@id="live"]//td[text()="dash"]`)); err != nil {
		t.Fatalf("the session is not listed: %v", err)
	}

	// decide starts the call, waits until the operator would see it, acts
	// on its card, and returns the reply and how long after the click it
	// came.
	decide := func(command string, act func(card string) []chromedp.Action[chromedp.Void]) (map[string]any, time.Duration) {
		t.Helper()
		replies := make(chan map[string]any, 1)
		go func() { replies <- s.exec(t, command) }()
		card := `//ol[@id="pending"]/li[.//code[text()="` + command + `"]]`
		if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
			t.Fatalf("the pending approval of %q did not show: %v", command, err)
		}
		select {
		case r := <-replies:
			t.Fatalf("the call answered before anyone decided: %v", r)
		default:
		}
		if err := chromedp.Do(ctx, act(card)...); err != nil {
			t.Fatal(err)
		}
		clicked := time.Now()
		select {
		case r := <-replies:
			return r, time.Since(clicked)
		case <-time.After(30 * time.Second):
			t.Fatalf("no reply 30 s after the click on %q", command)
		}
		return nil, 0
	}

	r, took := decide("echo approved-here", func(card string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{chromedp.Click(card + `//button[@aria-label="Approve"]`)}
	})
	if got := result(t, r)["stdout"]; got != "approved-here\n" || !strings.HasPrefix(str(r["approvalId"]), "apr_") {
		t.Fatalf("approved call: %v", r)
	}
	if took > time.Second {
		t.Errorf("the approved call answered %v after the click", took)
	}

	r, took = decide("echo denied-here", func(card string) []chromedp.Action[chromedp.Void] {
		return []chromedp.Action[chromedp.Void]{
			chromedp.SendKeys(card+`//input[contains(@class,"reason-text")]`, "not this one"),
			chromedp.Click(card + `//button[@aria-label="Deny"]`),
		}
	})
	if e := wantError(t, r, "approval_denied"); e["reason"] != "not this one" || e["decidedBy"] != "dashboard" {
		t.Errorf("denied call: %v", e)
	}
	if took > time.Second {
		t.Errorf("the denied call answered %v after the click", took)
	}
	// Both now show as decided, without a reload.
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`//ol[@id="recent"]/li[contains(., "denied-here") or contains(., "not this one")]`),
		chromedp.WaitVisible(`#pending-empty`)); err != nil {
		t.Errorf("the decisions did not move to recently decided: %v", err)
	}

	// The denied command was never typed: not in the recording.
	mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": "dash", "sessionToken": tok}))
	casts, _ := filepath.Glob(filepath.Join(srv.dataDir, "recordings", "*.cast"))
	if len(casts) != 1 {
		t.Fatalf("recordings: %v", casts)
	}
	cast, err := os.ReadFile(casts[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cast), "approved-here") || strings.Contains(string(cast), "denied-here") {
		t.Errorf("recording: approved command present %v, denied command present %v",
			strings.Contains(string(cast), "approved-here"), strings.Contains(string(cast), "denied-here"))
	}
}
