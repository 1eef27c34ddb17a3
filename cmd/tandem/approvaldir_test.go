package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestApprovalNamesItsDirectory: an approval is bound to the directory
// the command was judged in, and both the agent's approval_pending and the
// monitoring page's strip say which.
func TestApprovalNamesItsDirectory(t *testing.T) {
	ws := t.TempDir()
	sub := filepath.Join(ws, "app")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, serverOpts{dir: ws, config: askConfig(ws)})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "dir"}))["sessionToken"])
	s := sess{srv, "dir", tok}
	e := wantError(t, s.exec(t, "cd app"), "approval_pending")
	op := newOperatorClient(t, srv)
	op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":true}`)
	mustOK(t, s.exec(t, "cd app"))

	e = wantError(t, s.exec(t, "git push"), "approval_pending")
	if e["approvalCwd"] != sub || !strings.Contains(str(e["message"]), sub) {
		t.Errorf("approval_pending names approvalCwd %v and says %q; want %s", e["approvalCwd"], e["message"], sub)
	}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "dir", "sessionToken": tok}))["monitoringUrl"])
	ctx := testenv.Browser(t)
	signIn(t, ctx, url, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `String(Array.from(document.querySelectorAll('#strip-approvals li')).some(li => li.innerText.replace(/\s+/g, ' ').includes('Waiting for approval: git push in `+sub+`')))`, "true")
}
