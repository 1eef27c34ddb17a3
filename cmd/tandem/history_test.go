package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/server"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
	"github.com/tandem-sh/tandem/internal/web"
)

// dataDirToken reads the operator token a tandem keeps in its data dir:
// with it a test types into sessions as the operator does.
func dataDirToken(t testing.TB, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, server.DashboardTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// operatorHeader is what a browser signed in as the operator sends with the
// terminal's WebSocket: its own Origin and the operator's cookie.
func operatorHeader(monitorURL, token string) http.Header {
	return http.Header{"Origin": {strings.SplitN(monitorURL, "/s/", 2)[0]}, "Cookie": {"tandem_operator=" + token}}
}

// signIn signs the browser in as the operator of the tandem that serves
// monitorURL, with its dashboard link, as a human does once.
func signIn(t testing.TB, ctx context.Context, monitorURL, token string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(web.DashboardURL(strings.SplitN(monitorURL, "/s/", 2)[0], token))); err != nil {
		t.Fatal(err)
	}
}

// typeOverWebSocket types as the operator's browser would, over the
// terminal's socket, and stays until the terminal shows want, as a person
// watching would.
func typeOverWebSocket(t *testing.T, monitorURL, token, keys, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := "ws" + strings.TrimPrefix(monitorURL, "http") + "/ws"
	c, _, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: operatorHeader(monitorURL, token)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20) // the scrollback comes as one message
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"t":"i","d":`+quoteJSON(keys)+`}`)); err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	for !strings.Contains(seen.String(), want) {
		typ, p, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("terminal never showed %q: %v; its tail was %q", want, err, tail(seen.String()))
		}
		if typ == websocket.MessageBinary { // text messages are the page's strip, not the terminal
			seen.Write(p)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func quoteJSON(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\r", `\r`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestHistoryPersisted: every command, the agent's and the human's, is in
// the store with its metadata, and its full output is in spool files.
func TestHistoryPersisted(t *testing.T) {
	s := localSession(t, serverOpts{config: "targets:\n  - {name: local, kind: local, workspace: ws}\nlimits:\n  inlineOutputBytes: 4096\n"})
	mustOK(t, s.exec(t, "echo one; echo oops >&2; (exit 4)"))
	mustOK(t, s.exec(t, "seq 1 3000"))
	url := str(mustOK(t, s.srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	typeOverWebSocket(t, url, dataDirToken(t, s.srv.dataDir), "echo from-human\r", "\rfrom-human\r\n")
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && s.exec(t, "true")["error"] != "user_activity_detected" {
		time.Sleep(20 * time.Millisecond)
	}
	mustOK(t, s.srv.call(t, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))
	_ = s.srv.cs.Close() // closes stdin and waits for the process

	st, err := sqlite.Open(context.Background(), s.srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id string
	for _, r := range auditRecords(t, s.srv.dataDir) {
		if r.Event == "session_start" {
			id = r.SessionID
		}
	}
	rows, err := st.Commands(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ source, stdout, stderr string }
	byCmd := map[string]want{
		"echo one; echo oops >&2; (exit 4)": {"agent", "one\n", "oops\n"},
		"echo from-human":                   {"user", "from-human\n", ""},
	}
	var seq strings.Builder
	for i := 1; i <= 3000; i++ {
		seq.WriteString(strconv.Itoa(i) + "\n")
	}
	byCmd["seq 1 3000"] = want{"agent", seq.String(), ""}
	found := 0
	for _, r := range rows {
		w, ok := byCmd[r.Command]
		if !ok {
			continue
		}
		found++
		out, _ := os.ReadFile(r.StdoutPath)
		var errb []byte
		if r.StderrPath != "" {
			errb, _ = os.ReadFile(r.StderrPath)
		} else if r.StderrBytes != 0 {
			t.Errorf("%q: %d stderr bytes but no spool file", r.Command, r.StderrBytes)
		}
		if r.Source != w.source || string(out) != w.stdout || string(errb) != w.stderr || r.StdoutBytes != int64(len(w.stdout)) || r.ExitCode == nil || r.StartedAt.IsZero() || r.Cwd == "" {
			t.Errorf("%q: row %+v, stdout file %q, stderr file %q", r.Command, r, trunc(string(out)), errb)
		}
	}
	if found != 3 {
		t.Errorf("found %d of 3 commands in %d rows", found, len(rows))
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}

func trunc(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
