package main

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestDashboardAuditPages: the dashboard's audit table shows the newest
// 100 records of the real store, and Older records adds the page before,
// until none is left.
func TestDashboardAuditPages(t *testing.T) {
	srv := startServer(t, serverOpts{})
	for range 120 {
		mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{}))
	}
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(dashboardLink(t, srv.dataDir))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `String(document.querySelectorAll('#audit tbody tr').length)`, "100")
	waitPage(t, ctx, `String(!document.getElementById('audit-older').hidden)`, "true")
	if err := chromedp.Do(ctx, chromedp.Click("#audit-older")); err != nil {
		t.Fatal(err)
	}
	// The older page: the rest of the 120 calls, and the session-less
	// records before them; then nothing is older.
	waitPage(t, ctx, `String(document.querySelectorAll('#audit tbody tr').length > 100 && document.getElementById('audit-older').hidden)`, "true")
	waitPage(t, ctx, `String([...document.querySelectorAll('#audit tbody tr')].filter(tr => tr.cells[4].textContent === 'ssh_list_sessions').length)`, "120")
}
