package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// lockedText collects text written from several goroutines.
type lockedText struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedText) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedText) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fromTandem is what tandem sent the client: the "read: " lines of a
// LoggingTransport's log (the client's own requests are left out: the
// test types a secret into one on purpose).
func fromTandem(wire string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(wire))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "read: "); ok {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// getPage fetches url as the agent's HTTP client would, with no cookie.
func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	return string(b)
}

// watchLinkStrip reads the status strip a watch link's socket sends, as
// the agent's own client would (no cookie), until it holds want, and
// returns every message it read.
func watchLinkStrip(t *testing.T, mon, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(mon, "http")+"/ws",
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {strings.SplitN(mon, "/s/", 2)[0]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	var all strings.Builder
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			t.Errorf("the watch link's strip never sent %q: %v; it sent:\n%s", want, err, lastN(all.String(), 3000))
			return all.String()
		}
		all.Write(append(p, '\n'))
		if typ == websocket.MessageText && strings.Contains(string(p), want) {
			return all.String()
		}
	}
}

// TestRedactBesideOutput: the secrets of a workspace's .env reach neither
// the agent nor, with redact.viewers: true, anyone holding the watch
// link, by the ways around the output: a directory named after one (the
// cwd of a result and of list_sessions), a host name the egress proxy
// refuses (networkRefused, the strip's network) or asks about (the
// approval's connection, form and strip), a held program's argv
// (approval_pending, the approval form the client is shown, the strip's
// approvals), a command line a policy denies (the reply, the strip's
// denials), a program exec judging denies, and a human's command line
// while it runs. Every message tandem sends the agent's MCP client, every
// message and page the watch link serves (the terminal page and its
// WebSocket, the replay page, /cast) and the recordings are searched. The
// operator's dashboard still shows the held program as it is.
func TestRedactBesideOutput(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	dl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fetched-ok") }))
	t.Cleanup(dl.Close)
	port := portOf(t, dl.Listener.Addr())

	ws := t.TempDir()
	lower := "abcdefghijklmnopqrstuvwxyz0123456789"
	dirSecret, hostSecret := "dir"+randomOf(t, lower, 17), "host"+randomOf(t, lower, 16)
	apiToken, rmSecret := randomOf(t, alnum, 32), "rm"+randomOf(t, alnum, 18)
	secrets := []string{dirSecret, hostSecret, apiToken, rmSecret}
	env := fmt.Sprintf("DIR_SECRET=%s\nHOST_SECRET=%s\nAPI_TOKEN=%s\nRM_SECRET=%s\n", dirSecret, hostSecret, apiToken, rmSecret)
	files := map[string]string{
		".env": env,
		// The line judge sees ./fetch.sh; exec judging sees curl's argv.
		"fetch.sh": fmt.Sprintf("#!/bin/sh\n. %s/.env\ncurl -H \"Authorization: Bearer $API_TOKEN\" -sS --max-time 30 http://127.0.0.1:%d/\n", ws, port),
		"del.sh":   fmt.Sprintf("#!/bin/sh\n. %s/.env\nrm -rf \"$RM_SECRET\"\n", ws),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`targets:
  - name: dev
    kind: local
    workspace: %[1]s
    network: {allow: ["127.0.0.1:%[2]d"]}
    redact: {secretFiles: [.env], viewers: true}
  - name: asker
    kind: local
    workspace: %[1]s
    network: {allow: ["127.0.0.1:%[2]d"], ask: true}
    redact: {secretFiles: [.env], viewers: true}
policy:
  mode: allow
  rules:
    - {command: "curl -H *", decision: ask}
    - {command: "rm *", decision: deny}
approvals: {waitSeconds: 1, timeoutSeconds: 300}
`, ws, port)
	wire := &lockedText{}
	forms := &askedForms{}
	srv := startServer(t, serverOpts{dir: ws, config: cfg, wire: wire,
		elicit: func(_ context.Context, r *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			forms.add(r.Params.Message)
			return &sdk.ElicitResult{Action: "cancel"}, nil // dismissed: the dashboard decides
		}})
	op := newOperatorClient(t, srv)
	s := connectTo(t, srv, "dev", "dev")
	args := func(m map[string]any) map[string]any {
		m["sessionName"], m["sessionToken"] = s.name, s.tok
		return m
	}
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
	origin := strings.SplitN(mon, "/s/", 2)[0]

	// The agent watches its own link from the start: every message.
	watched := &lockedText{}
	wctx, stopWatching := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stopWatching()
	watcher, _, err := websocket.Dial(wctx, "ws"+strings.TrimPrefix(mon, "http")+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.CloseNow()
	watcher.SetReadLimit(16 << 20)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			_, p, err := watcher.Read(wctx)
			if err != nil {
				return
			}
			watched.Write(append(p, '\n'))
		}
	}()
	pages := map[string]string{"the terminal page": getPage(t, mon)}
	marker := "[REDACTED:file]"
	// valueOf is a command substitution that reads a value of the .env:
	// the agent's line names the secret without holding it.
	valueOf := func(name string) string { return "$(sed -n 's/^" + name + "=//p' " + ws + "/.env)" }
	// stripHolds waits until the watch link's strip has sent want.
	stripHolds := func(t *testing.T, want string) {
		t.Helper()
		if !waitFor(20*time.Second, func() bool { return strings.Contains(watched.String(), want) }) {
			t.Errorf("the watch link's strip never sent %q; it sent:\n%s", want, lastN(watched.String(), 3000))
		}
	}

	t.Run("a directory named after a secret", func(t *testing.T) {
		r := result(t, s.exec(t, `d="`+valueOf("DIR_SECRET")+`" && mkdir -p "$d" && cd "$d" && echo moved`))
		if r["cwd"] != ws+"/"+marker || r["stdout"] != "moved\n" {
			t.Errorf("the result's cwd %q, want %q: %v", r["cwd"], ws+"/"+marker, r)
		}
		l := mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{}))
		if one := l["sessions"].([]any)[0].(map[string]any); one["cwd"] != ws+"/"+marker {
			t.Errorf("list_sessions says cwd %q", one["cwd"])
		}
	})

	t.Run("a host name", func(t *testing.T) {
		r := result(t, s.exec(t, `curl -f -sS --max-time 20 "http://`+valueOf("HOST_SECRET")+`.example/"`))
		refused := refusedTargets(r)
		if len(refused) != 1 || refused[0] != marker+".example:80" || r["exitCode"] == 0.0 {
			t.Errorf("networkRefused %v: %v", refused, r)
		}
		stripHolds(t, `"target":"`+marker+`.example:80","decision":"refused"`)
	})

	t.Run("a held program's argv", func(t *testing.T) {
		e := wantError(t, s.exec(t, ws+"/fetch.sh", 60), "approval_pending")
		prog, _ := e["program"].(map[string]any)
		wantCmd := "curl -H 'Authorization: Bearer " + marker + "' -sS --max-time 30 " + fmt.Sprintf("http://127.0.0.1:%d/", port)
		if str(prog["command"]) != wantCmd || prog["cwd"] != ws+"/"+marker || !strings.Contains(str(e["message"]), "Bearer "+marker) {
			t.Errorf("approval_pending names the program %v, want %q: %v", prog, wantCmd, e)
		}
		if f := forms.all(); len(f) == 0 || !strings.Contains(f[len(f)-1], "Bearer "+marker) {
			t.Errorf("the approval form the client was shown: %q", f)
		}
		stripHolds(t, `"agent":"waiting_approval","command":"`+wantCmd+`"`)
		// The operator's own dashboard shows the program as it is.
		var shown string
		for _, p := range op.do(t, http.MethodGet, "/api/state", "")["pending"].([]any) {
			if a, _ := p.(map[string]any); str(a["id"]) == str(e["approvalId"]) {
				shown = str(a["action"].(map[string]any)["command"])
			}
		}
		if !strings.Contains(shown, "Bearer "+apiToken) {
			t.Errorf("the dashboard shows the held program as %q, want its exact argv", shown)
		}
		op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":true}`)
		waitCommand(t, s, str(e["commandId"]))
		got := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": e["commandId"]})))
		if got["data"] != "fetched-ok" {
			t.Errorf("the approved program's output: %v", got)
		}
	})

	t.Run("a denied command line", func(t *testing.T) {
		e := wantError(t, s.exec(t, "rm -f "+rmSecret), "policy_denied")
		if !strings.Contains(str(e["message"]), `"rm -f `+marker+`"`) {
			t.Errorf("the denial's message: %v", e)
		}
		stripHolds(t, `"tool":"ssh_exec","command":"rm -f `+marker+`","rule":`)
	})

	t.Run("a program denied at exec", func(t *testing.T) {
		r := result(t, s.exec(t, ws+"/del.sh"))
		blocked, _ := r["blocked"].([]any)
		if len(blocked) == 0 {
			t.Fatalf("the reply lists no block: %v", r)
		}
		b0 := blocked[0].(map[string]any)
		if argv, _ := b0["argv"].([]any); len(argv) != 3 || argv[2] != marker || b0["cwd"] != ws+"/"+marker {
			t.Errorf("blocked[0] = %v", b0)
		}
		stripHolds(t, `"command":"rm -rf `+marker+`","rule":`)
	})

	t.Run("a human's command line", func(t *testing.T) {
		// A short prompt: readline redraws a line longer than the terminal
		// with a carriage return where it wraps, and a value cut in two there
		// is not recognised (README, redaction: what it does not do).
		mustOK(t, s.exec(t, "cd /"))
		typeOverWebSocket(t, mon, dataDirToken(t, srv.dataDir), ": "+apiToken+"; sleep 1; echo human-$((20+22))\r", "human-42\r\n")
		g := wantError(t, gateOf(t, s), "user_activity_detected")
		if cmds, _ := g["userCommands"].([]any); len(cmds) != 1 || !strings.Contains(str(cmds[0].(map[string]any)["command"]), ": "+marker+";") {
			t.Errorf("the gate's report: %v", g)
		}
		stripHolds(t, `"source":"human","command":": `+marker+`;`)
	})

	// A second session, whose allowlist asks about unlisted hosts.
	asker := connectTo(t, srv, "asker", "asker")
	askerArgs := map[string]any{"sessionName": asker.name, "sessionToken": asker.tok}
	askerMon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", askerArgs))["monitoringUrl"])
	t.Run("an asked host", func(t *testing.T) {
		e := wantError(t, asker.exec(t, `curl -f -sS --max-time 60 "http://`+valueOf("HOST_SECRET")+`.example/"`, 60), "approval_pending")
		if e["connection"] != marker+".example:80" || !strings.Contains(str(e["message"]), "connection to "+marker+".example:80") {
			t.Errorf("approval_pending names the connection %v: %v", e["connection"], e)
		}
		if f := forms.all(); len(f) == 0 || !strings.Contains(f[len(f)-1], "connect to "+marker+".example:80") {
			t.Errorf("the approval form the client was shown: %q", f)
		}
		pages["the asking session's strip"] = watchLinkStrip(t, askerMon, `"command":"connect `+marker+`.example:80"`)
		op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":false,"reason":"not that host"}`)
		waitCommand(t, asker, str(e["commandId"]))
	})
	mustOK(t, srv.call(t, "ssh_disconnect", askerArgs))

	mustOK(t, srv.call(t, "ssh_disconnect", args(map[string]any{})))
	select {
	case <-watchDone:
	case <-wctx.Done():
		t.Fatal("the watch link's socket did not close when the session ended")
	}
	for name, link := range map[string]string{"": mon, "the asking session's ": askerMon} {
		if !waitFor(20*time.Second, func() bool {
			resp, err := http.Get(link + "/cast")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil && resp.StatusCode == http.StatusOK
		}) {
			t.Fatalf("the %srecording is never served on the watch link", name)
		}
		pages[name+"replay page"] = getPage(t, link)
		pages[name+"/cast"] = getPage(t, link+"/cast")
	}
	casts, _ := filepath.Glob(filepath.Join(srv.dataDir, "recordings", "*.cast"))
	if len(casts) != 2 {
		t.Fatalf("recordings: %v, want 2", casts)
	}
	for _, c := range casts {
		raw, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		pages["the recording "+filepath.Base(c)] = string(raw)
	}
	pages["every message tandem sent the agent's client"] = fromTandem(wire.String())
	pages["every message of the watch link's socket"] = watched.String()
	for where, text := range pages {
		noSecret(t, where, text, secrets)
	}
	if n := strings.Count(pages["every message tandem sent the agent's client"], marker); n < 8 {
		t.Errorf("the agent's client got %d markers, want 8 at least", n)
	}
}
