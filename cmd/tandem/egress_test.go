package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// portOf is the port a test server listens on.
func portOf(t *testing.T, addr net.Addr) int {
	t.Helper()
	return addr.(*net.TCPAddr).Port
}

// tlsServer serves "hello over tls" on loopback with a certificate for
// names, and returns its port and the certificate's file.
func tlsServer(t *testing.T, names ...string) (int, string) {
	t.Helper()
	certFile, keyFile := selfSignedFor(t, names...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over tls")
	})}
	go func() { _ = srv.ServeTLS(ln, certFile, keyFile) }()
	t.Cleanup(func() { _ = srv.Close() })
	return portOf(t, ln.Addr()), certFile
}

// egressConfig is tandem.yaml with local targets whose network is the
// given YAML (one per target name).
func egressConfig(ws string, targets map[string]string, extra string) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for name, network := range targets {
		fmt.Fprintf(&b, "  - name: %s\n    kind: local\n    workspace: %s\n    network: %s\n", name, ws, network)
	}
	b.WriteString(extra)
	return b.String()
}

// connectTo opens a session on target and returns it.
func connectTo(t testing.TB, srv *tandemProc, target, name string) sess {
	t.Helper()
	r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": name, "target": target}))
	return sess{srv, name, str(r["sessionToken"])}
}

// TestEgressAllowlist: a local session whose target has a network
// allowlist reaches the listed hosts through tandem's egress proxy and
// nothing else: not an unlisted host (the reply names it), not a direct
// connection past the proxy, not tandem's own web port or forward
// upstream, not another session's proxy port, and not a listed name that
// resolves to a loopback address no address rule lists. Every decision
// is in the audit log. It runs with each session in a network namespace
// of its own (the proxy's port is on the session's own loopback, out of
// the host's reach), and with namespaces off (TANDEM_NETNS=off: the port
// is on the host's loopback, the fallback filter holds).
func TestEgressAllowlist(t *testing.T) {
	for _, mode := range []string{"namespace", "fallback"} {
		t.Run(mode, func(t *testing.T) { testEgressAllowlist(t, mode == "namespace") })
	}
}

func testEgressAllowlist(t *testing.T, namespace bool) {
	tlsPort, certFile := tlsServer(t, "good.test", "other.test", "rebind.test")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain hello") }))
	t.Cleanup(plain.Close)
	plainPort := portOf(t, plain.Listener.Addr())
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the upstream approver") }))
	t.Cleanup(upstream.Close)
	upstreamPort := portOf(t, upstream.Listener.Addr())

	ws := t.TempDir()
	ca, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	// hosts maps names as the operator's own choice, which counts as
	// listing the address; localhost comes from the system's resolver
	// (/etc/hosts), as a name that DNS rebinds to loopback would.
	hosts := "{good.test: 127.0.0.1, other.test: 127.0.0.1, plain.test: 127.0.0.1}"
	cfg := egressConfig(ws, map[string]string{
		"listed": fmt.Sprintf(`{allow: ["good.test", "localhost", "plain.test:%d", "127.0.0.1:%d", "127.0.0.1:%d"], hosts: %s}`, plainPort, tlsPort, plainPort, hosts),
		// All of loopback: tandem's own ports must stay out of reach anyway.
		"loopback": `{allow: ["127.0.0.0/8", "[::1]"]}`,
	}, fmt.Sprintf("allowAdHoc: false\npolicy:\n  mode: allow\n  rules: [{command: never-run-this, decision: forward}]\n  forward: {url: http://127.0.0.1:%d/api/approvals, token: x}\n", upstreamPort))
	var env []string
	if !namespace {
		env = []string{"TANDEM_NETNS=off"}
	}
	srv := startServer(t, serverOpts{dir: ws, config: cfg, env: env})
	a := connectTo(t, srv, "listed", "a")
	b := connectTo(t, srv, "loopback", "b")

	mon, err := url.Parse(str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "a", "sessionToken": a.tok}))["monitoringUrl"]))
	if err != nil {
		t.Fatal(err)
	}
	webPort := mon.Port()
	proxyOf := func(s sess) string {
		return strings.TrimSpace(str(result(t, s.exec(t, "echo ${HTTPS_PROXY##*:}"))["stdout"]))
	}
	aProxy, bProxy := proxyOf(a), proxyOf(b)
	if aProxy == "" || aProxy == bProxy {
		t.Fatalf("proxy ports: a %q, b %q", aProxy, bProxy)
	}

	// Without a namespace, another user's process can reach the loopback
	// port too, but not use it: the credential is in the session's
	// HTTP_PROXY only. With one, the port is not on the host at all.
	outside := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:" + aProxy})}}
	resp, err := outside.Get("http://plain.test:" + strconv.Itoa(plainPort) + "/")
	switch {
	case namespace && err == nil:
		resp.Body.Close()
		t.Errorf("the session's proxy port answered on the host's loopback: %v", resp.Status)
	case !namespace && (err != nil || resp.StatusCode != http.StatusProxyAuthRequired):
		t.Errorf("a client without the session's credential: %v %v", resp, err)
	case err == nil:
		resp.Body.Close()
	}
	// A proxy port's number, as the host's: with namespaces nothing of
	// tandem's listens there (connection refused through the proxy, 502);
	// without, the proxy refuses its own ports (403).
	ownPort, bRefused, aRefused, wantRefused := "403", "127.0.0.1:"+bProxy, "127.0.0.1:"+aProxy, 7
	if namespace {
		ownPort, bRefused, aRefused, wantRefused = "502", "", "", 5
	}

	curl := "curl -sS --max-time 20 --cacert ca.pem "
	tests := []struct {
		name    string
		s       sess
		cmd     string
		stdout  string // "" when it must fail
		refused string // the host:port networkRefused must name
		why     string // in curl's error or the page it got
	}{
		{"an allowed host over https", a, curl + "https://good.test:" + strconv.Itoa(tlsPort) + "/", "hello over tls", "", ""},
		{"an allowed host and port over plain http", a, curl + "http://plain.test:" + strconv.Itoa(plainPort) + "/", "plain hello", "", ""},
		{"an unlisted host", a, curl + "https://other.test:" + strconv.Itoa(tlsPort) + "/", "", "other.test:" + strconv.Itoa(tlsPort), "403"},
		{"an unlisted host over plain http", a, curl + "-f http://other.test:" + strconv.Itoa(plainPort) + "/", "", "other.test:" + strconv.Itoa(plainPort), "403"},
		{"a listed name rebound to loopback", a, curl + "--proxy \"$HTTP_PROXY\" -f http://localhost:" + strconv.Itoa(upstreamPort) + "/", "", "localhost:" + strconv.Itoa(upstreamPort), "403"},
		{"a direct connection past the proxy", a, "bash -c 'echo hi > /dev/tcp/127.0.0.1/" + strconv.Itoa(tlsPort) + "'", "", "", "Permission denied"},
		{"curl told to skip the proxy", a, curl + "--noproxy '*' https://good.test:" + strconv.Itoa(tlsPort) + "/", "", "", "resolve"},
		{"tandem's web port", b, curl + "-f http://127.0.0.1:" + webPort + "/", "", "127.0.0.1:" + webPort, "403"},
		{"the forward upstream", b, curl + "-f http://127.0.0.1:" + strconv.Itoa(upstreamPort) + "/", "", "127.0.0.1:" + strconv.Itoa(upstreamPort), "403"},
		{"its own proxy port", b, curl + "-f http://127.0.0.1:" + bProxy + "/", "", bRefused, ownPort},
		{"another session's proxy port", b, curl + "-f http://127.0.0.1:" + aProxy + "/", "", aRefused, ownPort},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := result(t, tc.s.exec(t, tc.cmd))
			refused := refusedTargets(res)
			if tc.stdout != "" {
				if res["exitCode"] != 0.0 || str(res["stdout"]) != tc.stdout || len(refused) > 0 {
					t.Fatalf("%s: %v", tc.cmd, res)
				}
				conns, _ := res["connections"].([]any)
				if len(conns) == 0 {
					t.Fatalf("the reply lists no connection: %v", res)
				}
				c := conns[0].(map[string]any)
				if c["address"] != "127.0.0.1" || c["decision"] != "allowed" {
					t.Errorf("the connection's record: %v", c)
				}
				// Ended (as it normally is by the reply): its bytes and time.
				if c["open"] == false && (c["bytesDown"].(float64) < float64(len(tc.stdout)) || c["durationMs"] == nil) {
					t.Errorf("the ended connection's record: %v", c)
				}
				return
			}
			if res["exitCode"] == 0.0 || str(res["stdout"]) != "" || !strings.Contains(str(res["stderr"]), tc.why) {
				t.Fatalf("%s was not refused as expected (%q): %v", tc.cmd, tc.why, res)
			}
			if tc.refused != "" && (len(refused) != 1 || refused[0] != tc.refused) {
				t.Errorf("networkRefused %v, want [%s]", refused, tc.refused)
			}
		})
	}

	// Every decision is in the audit log, with its host and outcome.
	out, err := exec.Command(binary, "audit", "tail", "--data-dir", srv.dataDir, "--json", "-n", "200").Output()
	if err != nil {
		t.Fatal(err)
	}
	decisions := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Event, Outcome, Tool string
			Args                 json.RawMessage
		}
		if json.Unmarshal([]byte(line), &r) == nil && r.Event == "network" {
			decisions[r.Outcome]++
		}
	}
	if decisions["allowed"] < 2 || decisions["refused"] < wantRefused {
		t.Errorf("audited network decisions %v; want 2 allowed and %d refused at least:\n%s", decisions, wantRefused, out)
	}

	// Each command's durable row lists the connections its programs asked for.
	_ = srv.cs.Close() // closes stdin and waits for the process: every row is written
	st, err := sqlite.Open(context.Background(), srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows := map[string][]store.Connection{}
	for _, r := range auditRecords(t, srv.dataDir) {
		if r.Event != "session_start" {
			continue
		}
		cmds, err := st.Commands(context.Background(), r.SessionID)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			rows[c.Command] = c.Connections
		}
	}
	good := rows[tests[0].cmd]
	if len(good) != 1 || good[0].Host != "good.test" || good[0].Port != tlsPort || good[0].Addr != "127.0.0.1" ||
		good[0].Decision != "allowed" || good[0].BytesDown == 0 || good[0].BytesUp == 0 {
		t.Errorf("the row of %q lists %+v", tests[0].cmd, good)
	}
	other := rows[tests[2].cmd]
	if len(other) != 1 || other[0].Host != "other.test" || other[0].Decision != "refused" {
		t.Errorf("the row of %q lists %+v", tests[2].cmd, other)
	}
	if none := rows[tests[5].cmd]; len(none) != 0 {
		t.Errorf("a command that used no proxy lists %+v", none)
	}
}

// TestEgressAskHoldsTheCall: while a connection waits for a human past
// approvals.waitSeconds, the agent's ssh_exec answers approval_pending,
// naming the connection and the approval, as it does for a program that
// waits; the command keeps running, and goes on once a human approves.
func TestEgressAskHoldsTheCall(t *testing.T) {
	dl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "worth the wait") }))
	t.Cleanup(dl.Close)
	port := portOf(t, dl.Listener.Addr())
	ws := t.TempDir()
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["127.0.0.1:%d"], ask: true, hosts: {ask.test: 127.0.0.1}}`, port),
	}, "approvals: {waitSeconds: 2}\n")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	op := newOperatorClient(t, srv)
	s := connectTo(t, srv, "dev", "held")
	target := fmt.Sprintf("ask.test:%d", port)
	e := wantError(t, s.exec(t, "curl -sS -f --max-time 60 http://"+target+"/", 50), "approval_pending")
	if e["connection"] != target || str(e["approvalId"]) == "" || e["running"] != true || !strings.Contains(str(e["message"]), "connection to "+target) {
		t.Fatalf("the held call's reply: %v", e)
	}
	wantError(t, s.exec(t, "true"), "session_busy")
	op.do(t, http.MethodPost, "/api/approvals/"+str(e["approvalId"])+"/decision", `{"approve":true}`)
	args := map[string]any{"sessionName": "held", "sessionToken": s.tok, "commandId": e["commandId"], "waitSeconds": 20}
	var r map[string]any
	waitFor(30*time.Second, func() bool {
		r = mustOK(t, srv.call(t, "ssh_read_output", args))
		return r["running"] == false
	})
	if r["data"] != "worth the wait" || r["exitCode"] != 0.0 {
		t.Errorf("the approved download: %v", r)
	}
}

// TestEgressPackageManagers: real go and npm download through the proxy
// from registries served on loopback under test names.
func TestEgressPackageManagers(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go: %v", err)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Missing(t, "npm: %v", err)
	}
	gp := testenv.GoProxy(t, testenv.GoModule{Path: "example.com/hello", Version: "v1.0.0", Files: map[string]string{"hello.go": "package hello\n\nconst Hello = \"through the proxy\"\n"}})
	np := testenv.NPMRegistry(t, testenv.NPMPackage{Name: "tandem-pad", Version: "1.0.0", Files: map[string]string{"index.js": "module.exports = 'padded through the proxy';\n"}})
	ws := t.TempDir()
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["goproxy.test:%d", "npm.test:%d", "127.0.0.1:%d", "127.0.0.1:%d"], hosts: {goproxy.test: 127.0.0.1, npm.test: 127.0.0.1}}`, gp.Port, np.Port, gp.Port, np.Port),
	}, "")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	s := connectTo(t, srv, "dev", "pm")

	goCmd := fmt.Sprintf("(%s telemetry off && mkdir -p gomod && cd gomod && printf 'module m\\n\\ngo 1.21\\n' > go.mod && "+
		"GOPROXY=http://goproxy.test:%d GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local %s mod download -json example.com/hello@v1.0.0 && "+
		"cat \"$(%s env GOMODCACHE)/example.com/hello@v1.0.0/hello.go\")", goBin, gp.Port, goBin, goBin)
	res := result(t, s.exec(t, goCmd, 120))
	if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "through the proxy") {
		t.Fatalf("go mod download through the proxy: %v", res)
	}
	if !slicesContain(gp.Requests(), "/example.com/hello/@v/v1.0.0.zip") {
		t.Errorf("the go proxy saw %v", gp.Requests())
	}

	npmCmd := fmt.Sprintf("(mkdir -p npmproj && cd npmproj && echo '{}' > package.json && "+
		"npm install --registry http://npm.test:%d/ --no-audit --no-fund --no-update-notifier tandem-pad && node -p \"require('tandem-pad')\")", np.Port)
	res = result(t, s.exec(t, npmCmd, 120))
	if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "padded through the proxy") {
		t.Fatalf("npm install through the proxy: %v", res)
	}

	// Without the allowlist entry, the same download fails and says why.
	res = result(t, s.exec(t, "cd npmproj && npm install --registry http://unlisted.test:9/ --no-audit --no-fund --no-update-notifier --fetch-retries=0 left-pad", 120))
	refused := refusedTargets(res)
	if res["exitCode"] == 0.0 || len(refused) == 0 || refused[0] != "unlisted.test:9" {
		t.Errorf("npm install from an unlisted registry: %v", res)
	}
}

func slicesContain(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestEgressAsk: with ask, a connection to an unlisted host waits for a
// human; approved on the dashboard in Chromium, the download runs (the
// dashboard and the session's status strip show the open connection) and
// completes; denied, it fails, the strip names the refusal, and both
// decisions are audited.
func TestEgressAsk(t *testing.T) {
	body := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	release := make(chan struct{})
	dl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		fmt.Fprint(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		select { // the rest once the test has seen the open connection
		case <-release:
		case <-time.After(60 * time.Second):
		}
		fmt.Fprint(w, body[len(body)/2:])
	}))
	t.Cleanup(dl.Close)
	port := portOf(t, dl.Listener.Addr())
	ws := t.TempDir()
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["127.0.0.1:%d"], ask: true, hosts: {ask.test: 127.0.0.1}}`, port),
	}, "approvals: {waitSeconds: 60}\n")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	s := connectTo(t, srv, "dev", "asker")
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(dashboardLink(t, srv.dataDir)), chromedp.WaitVisible(`#pending-empty`)); err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("ask.test:%d", port)
	card := `//ol[@id="pending"]/li[.//code[text()="connect ` + target + `"]]`
	// The session's monitoring page, in a tab of its own.
	page, cancelPage := chromedp.NewContext(ctx)
	t.Cleanup(cancelPage)
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "asker", "sessionToken": s.tok}))["monitoringUrl"])
	if err := chromedp.Do(page, chromedp.Navigate(mon)); err != nil {
		t.Fatal(err)
	}
	strip := func(want string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(page, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.Poll[chromedp.Void](`document.getElementById('strip-network').textContent.includes(`+quoteJS(want)+`)`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			got, _ := chromedp.Run(page, chromedp.Evaluate[string](`document.getElementById('strip-network').textContent`))
			t.Fatalf("the status strip never showed %q (%v): %q", want, err, got)
		}
	}
	download := func(button string, whileOpen func()) map[string]any {
		t.Helper()
		replies := make(chan map[string]any, 1)
		go func() {
			replies <- s.exec(t, "curl -sS -f --max-time 90 -o got http://"+target+"/ && wc -c < got", 120)
		}()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitVisible(card)); err != nil {
			t.Fatalf("no pending approval for %s: %v", target, err)
		}
		select {
		case r := <-replies:
			t.Fatalf("the download ended before anyone decided: %v", r)
		default:
		}
		if err := chromedp.Do(ctx, chromedp.Click(card+`//button[@aria-label="`+button+`"]`)); err != nil {
			t.Fatal(err)
		}
		if whileOpen != nil {
			whileOpen()
		}
		return <-replies
	}
	res := result(t, download("Approve", func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitVisible(`//table[@id="live"]//td[contains(., "connected to `+target+`")]`)); err != nil {
			t.Errorf("the dashboard does not show the open connection: %v", err)
		}
		strip("Connected: " + target)
		close(release)
	}))
	if res["exitCode"] != 0.0 || strings.TrimSpace(str(res["stdout"])) != strconv.Itoa(len(body)) {
		t.Fatalf("the approved download: %v", res)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#pending-empty`)); err != nil {
		t.Fatal(err)
	}
	res = result(t, download("Deny", nil))
	refused := refusedTargets(res)
	if res["exitCode"] == 0.0 || len(refused) != 1 || refused[0] != target {
		t.Fatalf("the denied download: %v", res)
	}
	strip("Network refused: " + target)
	out, err := exec.Command(binary, "audit", "tail", "--data-dir", srv.dataDir, "--json", "-n", "100").Output()
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct{ Event, Outcome string }
		if json.Unmarshal([]byte(line), &r) == nil && r.Event == "network" {
			outcomes = append(outcomes, r.Outcome)
		}
	}
	if strings.Join(outcomes, " ") != "approved denied" {
		t.Errorf("audited network decisions %v, want [approved denied]", outcomes)
	}
}
