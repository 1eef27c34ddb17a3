package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// dashboardLink is the sign-in link of the one tandem serving on dataDir,
// as an operator gets it when tandem's stderr is not a terminal (a test's
// pipe, an MCP client's log): from tandem dashboard-url.
func dashboardLink(t testing.TB, dataDir string) string {
	t.Helper()
	out, err := exec.Command(binary, "dashboard-url", "--data-dir", dataDir).Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 1 || !strings.Contains(lines[0], "?token=") {
		t.Fatalf("dashboard-url: %v %q", err, out)
	}
	return strings.Fields(lines[0])[0]
}

// TestDashboardDecidesAgentCalls: an agent's call waits on the policy; the
// operator approves it, then denies another, from the dashboard in
// headless Chromium, and each call answers within a second of the click.
// The denied command never reaches the shell or its recording.
func TestDashboardDecidesAgentCalls(t *testing.T) {
	// A long wait: only the dashboard's answer can end the call.
	cfg := strings.Replace(askConfig(t.TempDir()), "waitSeconds: 1", "waitSeconds: 60", 1)
	srv := startServer(t, serverOpts{config: cfg})
	m := []string{"", dashboardLink(t, srv.dataDir)}
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

// TestDashboardURLListsLiveTandems: two tandems serve on one data dir and
// a third was killed; dashboard-url names the two, each with its mode,
// pid, start and sessions, and not the dead one. A data dir nothing
// serves on says so.
func TestDashboardURLListsLiveTandems(t *testing.T) {
	home := t.TempDir()
	a := startServer(t, serverOpts{home: home, dir: t.TempDir()})
	b := startServer(t, serverOpts{home: home, dir: t.TempDir()})
	mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "one"}))

	dead := exec.Command(binary, "serve", "--web", "127.0.0.1:0", "--data-dir", a.dataDir, "--workspace", t.TempDir())
	stdin, err := dead.StdinPipe() // held open: it serves until killed
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close() })
	deadErr, err := os.CreateTemp(t.TempDir(), "stderr-*")
	if err != nil {
		t.Fatal(err)
	}
	dead.Stderr = deadErr
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		out, _ := exec.Command(binary, "dashboard-url", "--data-dir", a.dataDir).Output()
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	// A loaded machine starts a tandem in seconds, not milliseconds.
	if !waitFor(60*time.Second, func() bool { return len(list()) == 3 }) {
		b, _ := os.ReadFile(deadErr.Name())
		t.Fatalf("three live tandems, listed: %q; the third's stderr:\n%s", list(), b)
	}
	_ = dead.Process.Kill()
	_ = dead.Wait()

	got := list()
	if len(got) != 2 {
		t.Fatalf("after one was killed: %q", got)
	}
	tok, err := os.ReadFile(filepath.Join(a.dataDir, "dashboard.token"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{a.cmd.Process.Pid: "1 session", b.cmd.Process.Pid: "0 sessions"}
	for _, line := range got {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "http://127.0.0.1:") || !strings.HasSuffix(f[0], "/?token="+strings.TrimSpace(string(tok))) {
			t.Errorf("line %q does not start with a sign-in link", line)
			continue
		}
		found := false
		for pid, sessions := range want {
			if strings.Contains(line, fmt.Sprintf("stdio, pid %d, started ", pid)) && strings.HasSuffix(line, ", "+sessions) {
				found = true
				delete(want, pid)
			}
		}
		if !found {
			t.Errorf("line %q names no expected tandem", line)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v (got %q)", want, got)
	}

	empty := filepath.Join(t.TempDir(), "state")
	out, err := exec.Command(binary, "dashboard-url", "--data-dir", empty).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no tandem is serving on the data dir "+empty) {
		t.Errorf("a data dir nothing serves on: %v %q", err, out)
	}
}

// TestJSONLogsAreJSON: with --log-format json and stderr not a terminal,
// every line tandem writes to stderr is a JSON object, and none holds the
// operator token; the log names the file the sign-in link is in.
func TestJSONLogsAreJSON(t *testing.T) {
	srv := startServer(t, serverOpts{dir: t.TempDir(), args: []string{"--log-format", "json"}})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "j"}))["sessionToken"])
	s := sess{srv, "j", tok}
	if res := result(t, s.exec(t, "echo hi", 10)); res["stdout"] != "hi\n" {
		t.Fatalf("exec: %v", res)
	}
	op, err := os.ReadFile(filepath.Join(srv.dataDir, "dashboard.token"))
	if err != nil {
		t.Fatal(err)
	}
	sawFile := false
	for _, line := range strings.Split(strings.TrimSpace(srv.log()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a stderr line is not JSON: %q", line)
			continue
		}
		if strings.Contains(line, strings.TrimSpace(string(op))) {
			t.Errorf("a log line holds the operator token: %q", line)
		}
		if f, _ := rec["file"].(string); strings.HasPrefix(f, filepath.Join(srv.dataDir, "instances")) {
			sawFile = true
		}
	}
	if !sawFile {
		t.Errorf("the log does not say where the sign-in link is:\n%s", srv.log())
	}
	if link := dashboardLink(t, srv.dataDir); !strings.HasSuffix(link, "?token="+strings.TrimSpace(string(op))) {
		t.Errorf("dashboard-url: %q", link)
	}
}

// TestTypingLinkAudited: a typing link the operator makes is in the audit
// log, with its session: who may type in a session is part of its record.
func TestTypingLinkAudited(t *testing.T) {
	srv := startServer(t, serverOpts{})
	s := connectTo(t, srv, "local", "linked")
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	u, err := url.Parse(mon)
	if err != nil {
		t.Fatal(err)
	}
	link := str(newOperatorClient(t, srv).do(t, http.MethodPost, "/api/admit", `{"path":"`+u.Path+`"}`)["url"])
	if !strings.Contains(link, "?admit=") {
		t.Fatalf("typing link %q", link)
	}
	var found []string
	for _, rec := range auditRecords(t, srv.dataDir) {
		if rec.Event == "typing_link" {
			found = append(found, rec.SessionName+" by "+rec.Actor+": "+rec.Outcome)
		}
	}
	if len(found) != 1 || found[0] != "linked by operator: ok" {
		t.Errorf("audited typing links: %q", found)
	}
	if strings.Contains(fmt.Sprint(auditRecords(t, srv.dataDir)), strings.SplitN(link, "?admit=", 2)[1]) {
		t.Error("the audit holds the typing link's token")
	}
}
