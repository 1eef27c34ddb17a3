package main

import (
	"net/http"
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

// TestDashboardNamesStdioClients: the dashboard names a stdio client's
// sessions and audit records by the client it declared, not by the
// random connection id.
func TestDashboardNamesStdioClients(t *testing.T) {
	srv := startServer(t, serverOpts{})
	mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "named"}))
	op := newOperatorClient(t, srv)
	st := op.do(t, http.MethodGet, "/api/state", "")
	rows, _ := st["sessions"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["actor"] != "stdio client (e2e 1)" {
		t.Fatalf("the dashboard's sessions: %v", st["sessions"])
	}
	recs, _ := op.do(t, http.MethodGet, "/api/audit?session=named", "")["records"].([]any)
	if len(recs) == 0 {
		t.Fatal("no audit record of the session")
	}
	for _, r := range recs {
		if a := r.(map[string]any)["actor"]; a != "stdio client (e2e 1)" {
			t.Errorf("an audit record's actor is %v", a)
		}
	}
}
