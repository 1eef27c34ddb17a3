package main

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// devServerPy is the agent's dev server in the preview tests: a page
// whose script (a relative link) opens a WebSocket to its own origin and
// shows the echo of "ping"; /go redirects to the server's own absolute
// URL (localhost:PORT), as frameworks do; /landed is where it lands. Its
// sockets set TCP_NODELAY, as Node's HTTP servers do, unless its second
// argument is "nagle" (as python -m http.server leaves them).
// Python's standard library has no WebSocket server: the handshake and one
// frame each way are written out here.
const devServerPy = `import base64, hashlib, http.server, socketserver, sys
port = int(sys.argv[1])
PAGE = b"<!doctype html><title>dev</title><h1 id=title>dev server</h1><p id=ws>waiting</p><script src='app.js'></script>"
APP = b"const s = new WebSocket('ws://' + location.host + '/ws'); s.onopen = () => s.send('ping'); s.onmessage = (e) => { document.getElementById('ws').textContent = e.data; };"
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = len(sys.argv) < 3 or sys.argv[2] != "nagle"
    def log_message(self, *a): pass
    def body(self, code, ctype, b, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path == "/": return self.body(200, "text/html", PAGE, [("Set-Cookie", "app=1; Path=/"), ("Set-Cookie", "tandem_operator=forged; Path=/")])
        if self.path == "/app.js": return self.body(200, "text/javascript", APP)
        if self.path == "/go": return self.body(302, "text/plain", b"", [("Location", "http://localhost:%d/landed?from=go" % port)])
        if self.path.startswith("/landed"): return self.body(200, "text/html", b"<!doctype html><title>landed</title><p id=landed>landed</p>")
        if self.path == "/cookies": return self.body(200, "text/plain", self.headers.get("Cookie", "").encode())
        if self.path == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            self.wfile.flush()
            r = self.rfile
            while True:
                h = r.read(2)
                if len(h) < 2: return
                n = h[1] & 127
                if n == 126: n = int.from_bytes(r.read(2), "big")
                elif n == 127: n = int.from_bytes(r.read(8), "big")
                mask = r.read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
                if h[0] & 15 == 8: return
                out = b"echo " + data
                self.wfile.write(bytes([0x81, len(out)]) + out)
                self.wfile.flush()
        return self.body(404, "text/plain", b"not found")
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
S(("127.0.0.1", port), H).serve_forever()
`

// TestPreview: a dev server the agent starts in the background, in a
// local sandboxed session (inside its network namespace) and over SSH (on
// the remote's loopback), is reached through ssh_forward_port's URL in
// real Chromium by the signed-in operator: the page loads, its WebSocket
// echoes, the redirect to its own localhost URL stays in the preview, and
// tandem's cookies never reach it. The watch link alone gets 401. From
// the preview's origin, the agent's script cannot read /api/state, cannot
// approve its own pending command, and cannot open the terminal's
// socket. The forward ends with the session, and says so in the audit.
func TestPreview(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Missing(t, "python3 is needed: %v", err)
	}
	t.Run("local", func(t *testing.T) {
		ws := t.TempDir()
		cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + previewPolicy
		srv := startServer(t, serverOpts{config: cfg})
		tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "dev", "target": "local"}))["sessionToken"])
		// Inside the session's own namespace every port is free.
		previewStory(t, srv, sess{srv, "dev", tok}, ws, 3000)
	})
	t.Run("ssh", func(t *testing.T) {
		d := testenv.SSHD(t)
		srv := startServer(t, serverOpts{config: previewPolicy})
		tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "dev", "host": d.Host, "port": d.Port,
			"username": d.User, "keyFilePath": d.ClientKeyFile}))["sessionToken"])
		// The remote is this host: a port free on its loopback.
		previewStory(t, srv, sess{srv, "dev", tok}, d.Home, freePort(t))
	})
}

// previewPolicy allows everything but asks before touch, so that a
// command waits for approval while the agent's page tries to approve it.
const previewPolicy = `policy:
  mode: allow
  rules:
    - {command: "touch *", decision: ask}
approvals: {waitSeconds: 1, timeoutSeconds: 300}
`

// freePort is a TCP port nothing listens on, on the host's loopback.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func previewStory(t *testing.T, srv *tandemProc, s sess, dir string, port int) {
	if err := os.WriteFile(filepath.Join(dir, "devserver.py"), []byte(devServerPy), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(more map[string]any) map[string]any {
		more["sessionName"], more["sessionToken"] = s.name, s.tok
		return more
	}
	mustOK(t, s.exec(t, "cd "+dir+" && (python3 devserver.py "+strconv.Itoa(port)+" >devserver.log 2>&1 &)"))
	// The agent forwards the port; it answers once the server listens.
	var fw map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		fw = mustOK(t, srv.call(t, "ssh_forward_port", args(map[string]any{"port": port})))
		if fw["listening"] == true {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "devserver.log"))
			t.Fatalf("the dev server never listened: %v; its log: %s", fw, log)
		}
	}
	previewURL := str(fw["url"])
	monitorURL := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
	base := strings.SplitN(monitorURL, "/s/", 2)[0]
	if want := monitorURL + "/port/" + strconv.Itoa(port) + "/"; previewURL != want {
		t.Fatalf("url %q, want %q", previewURL, want)
	}
	list := mustOK(t, srv.call(t, "ssh_list_ports", args(map[string]any{})))
	if ports, _ := list["ports"].([]any); len(ports) != 1 || ports[0].(map[string]any)["url"] != previewURL {
		t.Errorf("ssh_list_ports: %v", list)
	}

	// The watch link alone: 401, to a program and to a browser.
	res, err := http.Get(previewURL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the preview with the watch link alone: %d, want 401", res.StatusCode)
	}
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(monitorURL)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(previewURL)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `String(location.href === `+jsString(previewURL)+` && document.body.innerText.includes('the watch link alone does not open it'))`, "true")

	// The signed-in operator finds the port's link on the monitoring page.
	signIn(t, ctx, monitorURL, dataDirToken(t, srv.dataDir))
	if err := chromedp.Do(ctx, chromedp.Navigate(monitorURL)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `(() => { const a = document.querySelector('#strip-ports a'); return a ? a.href : ''; })()`, previewURL)
	if err := chromedp.Do(ctx, chromedp.Navigate(previewURL)); err != nil {
		t.Fatal(err)
	}
	// The page, its script (a relative link) and its WebSocket.
	waitPage(t, ctx, `document.getElementById('title') ? document.getElementById('title').textContent + ' / ' + document.getElementById('ws').textContent : ''`, "dev server / echo ping")
	origin, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(origin, "http://127.0.0.1:") || !strings.HasPrefix(origin, "http://127.") {
		t.Fatalf("the preview runs on %q, tandem on %q: it needs a loopback host of its own", origin, base)
	}
	// The redirect to the server's own localhost URL stays in the preview.
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/go")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `location.href + ' ' + (document.getElementById('landed') ? 'landed' : '')`, origin+"/landed?from=go landed")
	// Cookies: the app's own pass, tandem's never reach it, and the app
	// could not set tandem's.
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/cookies")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `document.body.innerText.trim()`, "app=1")
	// A second preview (another dev server of the session; another
	// session's alike) lives on a host of its own: the first app's cookie
	// reaches neither its server nor its script. Entered straight at
	// /cookies, so this app sets none of its own first.
	port2 := port + 1
	if port != 3000 {
		port2 = freePort(t)
	}
	mustOK(t, s.exec(t, "cd "+dir+" && (python3 devserver.py "+strconv.Itoa(port2)+" >devserver2.log 2>&1 &)"))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if fw2 := mustOK(t, srv.call(t, "ssh_forward_port", args(map[string]any{"port": port2}))); fw2["listening"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second dev server never listened")
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/s/"+strings.SplitN(monitorURL, "/s/", 2)[1]+"/port/"+strconv.Itoa(port2)+"/cookies")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `location.pathname === '/cookies' ? 'server [' + document.body.innerText.trim() + '] script [' + document.cookie + '] ' + (location.origin === `+jsString(origin)+` ? 'same origin' : 'own origin') : ''`,
		"server [] script [] own origin")
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/cookies")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `document.body.innerText.trim()`, "app=1")

	// The agent's script on the preview's origin against tandem's origin,
	// with the operator's cookie in the browser: a command waits for
	// approval, which the script tries to give.
	marker := filepath.Join(dir, "approved-by-the-page")
	e := wantError(t, s.exec(t, "touch "+marker), "approval_pending")
	id := str(e["approvalId"])
	attack := `(async () => {
	  const base = ` + jsString(base) + `;
	  const out = [];
	  try { const r = await fetch(base + '/api/state', {credentials: 'include'}); out.push('state read ' + r.status + ' ' + (await r.text()).length); } catch (e) { out.push('state blocked'); }
	  for (const mode of ['cors', 'no-cors']) {
	    try {
	      await fetch(base + '/api/approvals/` + id + `/decision', {method: 'POST', mode, credentials: 'include',
	        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({approve: true})});
	    } catch (e) {}
	    try {
	      await fetch(base + '/api/approvals/` + id + `/decision', {method: 'POST', mode, credentials: 'include',
	        headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({approve: true})});
	    } catch (e) {}
	  }
	  out.push(await new Promise((resolve) => {
	    const ws = new WebSocket(` + jsString("ws"+strings.TrimPrefix(monitorURL, "http")+"/ws") + `);
	    ws.onopen = () => { ws.send(JSON.stringify({t: 'i', d: 'touch ` + marker + `-typed\r'})); resolve('terminal opened'); };
	    ws.onerror = () => resolve('terminal refused');
	    setTimeout(() => resolve('terminal timeout'), 5000);
	  }));
	  return out.join(', ');
	})()`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](attack, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != "state blocked, terminal refused" {
		t.Errorf("the preview's script against tandem: %s", got)
	}
	// The approval still waits: the repeat of the call is pending again.
	wantError(t, s.exec(t, "touch "+marker), "approval_pending")
	for _, p := range []string{marker, marker + "-typed"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the preview's script made %s", p)
		}
	}

	// The forward ends with the session, and the audit says so.
	fwdAddr := strings.TrimPrefix(origin, "http://")
	mustOK(t, srv.call(t, "ssh_disconnect", args(map[string]any{})))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", fwdAddr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the forward at %s outlived its session", fwdAddr)
		}
	}
	closed := func() bool {
		for _, r := range auditRecords(t, srv.dataDir) {
			if r.Event == "port_closed" && r.Reason == "session_ended" && r.SessionName == s.name && string(r.Args) == `{"port":`+strconv.Itoa(port)+`}` {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !closed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the audit has no port_closed record for port %d of %s", port, s.name)
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string { return strconv.Quote(s) }

// TestPreviewContainment: a forward gives the session no way out. With a
// port forwarded (its server answering through the preview), the
// containment attacks of TestNetworkContainment reach none of the test's
// listeners, and the session reaches neither the forward's own listener
// nor tandem's web listener on the host's loopback.
func TestPreviewContainment(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Missing(t, "python3 is needed: %v", err)
	}
	n := trap(t)
	ws := t.TempDir()
	for name, body := range map[string]string{"attack.py": attackPy, "devserver.py": devServerPy} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := startServer(t, serverOpts{config: "targets: [{name: local, kind: local, workspace: " + ws + "}]\n"})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "contained", "target": "local"}))["sessionToken"])
	s := sess{srv, "contained", tok}
	mustOK(t, s.exec(t, "(python3 devserver.py 3000 >devserver.log 2>&1 &)"))
	var fw map[string]any
	for deadline := time.Now().Add(20 * time.Second); fw["listening"] != true; time.Sleep(50 * time.Millisecond) {
		fw = mustOK(t, srv.call(t, "ssh_forward_port", map[string]any{"sessionName": s.name, "sessionToken": tok, "port": 3000}))
		if time.Now().After(deadline) {
			t.Fatalf("the dev server never listened: %v", fw)
		}
	}
	// The forward works: the operator's request reaches the server.
	monitorURL := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": tok}))["monitoringUrl"])
	_, forwardAddr := enterPreview(t, str(fw["url"]), dataDirToken(t, srv.dataDir))

	containedFrom(t, s, n, ws, true)

	webAddr := strings.TrimPrefix(strings.SplitN(monitorURL, "/s/", 2)[0], "http://")
	probe := `import socket, sys
for addr in sys.argv[1:]:
    host, port = addr.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print(addr, "reached")
    except OSError as e:
        print(addr, "error", e.errno)
`
	if err := os.WriteFile(filepath.Join(ws, "probe.py"), []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	got := result(t, s.exec(t, "python3 probe.py "+forwardAddr+" "+webAddr, 30))
	if out := str(got["stdout"]); strings.Contains(out, "reached") || strings.Count(out, " error ") != 2 {
		t.Errorf("from the session, tandem's listeners on the host:\n%s%s", out, str(got["stderr"]))
	}
}

// enterPreview opens a preview URL as the signed-in operator's browser
// would (following the ticket to the forward's origin) and returns the
// browser, let into the forward, and the forward's address once its page
// answers.
func enterPreview(t testing.TB, previewURL, operatorToken string) (*http.Client, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("GET", previewURL, nil)
	req.Header.Set("Cookie", "tandem_operator="+operatorToken)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), "dev server") {
		t.Fatalf("the preview: %d %s", res.StatusCode, body)
	}
	return c, res.Request.URL.Host
}

// TestPreviewPolicy: the policy judges ssh_forward_port like any tool: a
// deny rule refuses it, naming the rule, and nothing is forwarded.
func TestPreviewPolicy(t *testing.T) {
	ws := t.TempDir()
	cfg := "targets: [{name: local, kind: local, workspace: " + ws + "}]\n" + `policy:
  mode: allow
  rules:
    - {tool: ssh_forward_port, decision: deny}
`
	srv := startServer(t, serverOpts{config: cfg})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "p", "target": "local"}))["sessionToken"])
	args := map[string]any{"sessionName": "p", "sessionToken": tok}
	r := wantError(t, srv.call(t, "ssh_forward_port", map[string]any{"sessionName": "p", "sessionToken": tok, "port": 3000}), "policy_denied")
	if !strings.Contains(str(r["rule"]), "ssh_forward_port") {
		t.Errorf("the refusal names rule %v", r["rule"])
	}
	if ports := mustOK(t, srv.call(t, "ssh_list_ports", args))["ports"].([]any); len(ports) != 0 {
		t.Errorf("a refused forward is listed: %v", ports)
	}
}
