package main

import (
	"net/http"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestApprovedAfterTheCallReturned: the agent's call answered
// approval_pending; the operator approves on the monitoring page in
// Chromium, and the page's strip, then the dashboard, say that the agent's
// next identical call runs it and until when. That call runs it, and both
// stop saying so.
func TestApprovedAfterTheCallReturned(t *testing.T) {
	srv := startServer(t, serverOpts{config: askConfig(t.TempDir())})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "held"}))["sessionToken"])
	s := sess{srv, "held", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "held", "sessionToken": tok}))["monitoringUrl"])
	id := str(wantError(t, s.exec(t, "echo ran-when-repeated"), "approval_pending")["approvalId"])

	ctx := testenv.Browser(t)
	signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	item := `//ul[@id="strip-approvals"]/li[@data-id="` + id + `"]`
	if err := chromedp.Do(ctx, chromedp.Click(item+`//button[text()="Approve"]`)); err != nil {
		t.Fatalf("approve on the page: %v", err)
	}
	held := `document.getElementById('strip-held').innerText.replace(/\s+/g, ' ').trim()`
	waitPage(t, ctx, `String(/^Approved — the agent's next identical call runs it \(until \d\d:\d\d( [AP]M)?\): echo ran-when-repeated$/.test(`+held+`))`, "true")
	waitPage(t, ctx, `String(document.querySelectorAll('#strip-approvals li').length)`, "0")

	op := newOperatorClient(t, srv)
	if h, _ := op.do(t, http.MethodGet, "/api/state", "")["held"].([]any); !slices.Contains(h, any(id)) {
		t.Fatalf("the dashboard's held approvals: %v", h)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(dashboardLink(t, srv.dataDir))); err != nil {
		t.Fatal(err)
	}
	note := `(document.querySelector('#recent li[data-id="` + id + `"] .held') || {}).textContent`
	waitPage(t, ctx, `String(/^approved — the agent's next identical call runs it \(until \d\d:\d\d( [AP]M)?\)$/.test(`+note+`))`, "true")

	if got := result(t, s.exec(t, "echo ran-when-repeated"))["stdout"]; got != "ran-when-repeated\n" {
		t.Fatalf("the repeated call: %v", got)
	}
	// Picked up: the dashboard no longer says it waits for the agent.
	waitPage(t, ctx, `String(!!document.querySelector('#recent li[data-id="`+id+`"]') && !document.querySelector('#recent li[data-id="`+id+`"] .held'))`, "true")
}
