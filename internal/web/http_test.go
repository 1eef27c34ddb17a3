package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/web"
)

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

func TestPage(t *testing.T) {
	const name = `<img src=x onerror=alert(1)>`
	term := newFakeTerm(name)
	term.owner = `acme · <b onmouseover=x>mallory</b>` // an actor name is the token issuer's text, not tandem's
	base := startServer(t, sessions{testKey: term})
	resp := get(t, web.MonitorURL(base, testKey))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	for header, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"Cache-Control":          "no-store",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy = %q, missing %q", csp, want)
		}
	}
	page := body(t, resp)
	checkPageSafe(t, page, name)
	if strings.Contains(page, "<b onmouseover") || !strings.Contains(page, `acme · &lt;b onmouseover=x&gt;mallory&lt;/b&gt;`) {
		t.Errorf("page does not show the owner escaped:\n%s", page)
	}
}

func TestNotFoundRevealsNothing(t *testing.T) {
	base := startServer(t, sessions{testKey: newFakeTerm("secret-session-name")})
	unknown := body(t, get(t, base+"/no/such/page"))
	for _, path := range []string{
		"/s/wrong-key",
		"/s/wrong-key/ws",
		"/s/wrong-key/cast",
		"/s/" + testKey + "/cast",
		"/s/" + testKey + "x",
		"/s/",
		"/assets/terminal.html",
		"/assets/replay.html",
		"/assets/dashboard.html",
		"/assets/signin.html",
		"/api/state",
		"/assets/vendor/",
		"/assets/vendor/LICENSE.xterm",
	} {
		resp := get(t, base+path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status = %d, want 404", path, resp.StatusCode)
		}
		if got := body(t, resp); got != unknown {
			t.Errorf("GET %s: body differs from any unknown path's:\n%s", path, got)
		}
	}
	if strings.Contains(unknown, "secret-session-name") || strings.Contains(unknown, testKey) {
		t.Errorf("404 page reveals the session:\n%s", unknown)
	}
}

// TestIndexExplains: the bare address says what tandem is and where links
// come from, instead of a 404, and names no session.
func TestIndexExplains(t *testing.T) {
	base := startServer(t, sessions{testKey: newFakeTerm("secret-session-name")})
	resp := get(t, base+"/")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	page := body(t, resp)
	for _, want := range []string{"tandem", "monitoringUrl", "ssh_get_monitoring_url", "lists no sessions"} {
		if !strings.Contains(page, want) {
			t.Errorf("index page lacks %q", want)
		}
	}
	if strings.Contains(page, "secret-session-name") || strings.Contains(page, testKey) {
		t.Errorf("index page reveals a session:\n%s", page)
	}
	if strings.Contains(page, "<script") {
		t.Errorf("index page runs script:\n%s", page)
	}
	if resp := get(t, base+"/index.html"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /index.html: %d, want 404", resp.StatusCode)
	}
}

func TestAssets(t *testing.T) {
	base := startServer(t, sessions{})
	for path, want := range map[string]string{
		"/assets/terminal.js":         "text/javascript",
		"/assets/replay.js":           "text/javascript",
		"/assets/terminal.css":        "text/css",
		"/assets/dashboard.js":        "text/javascript",
		"/assets/dashboard.css":       "text/css",
		"/assets/signin.js":           "text/javascript",
		"/assets/vendor/xterm.js":     "text/javascript",
		"/assets/vendor/xterm.css":    "text/css",
		"/assets/vendor/addon-fit.js": "text/javascript",
	} {
		resp := get(t, base+path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status = %d, want 200", path, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, want) {
			t.Errorf("GET %s: Content-Type = %q, want %s", path, got, want)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options = %q, want nosniff", path, got)
		}
	}
}

func TestMonitorURL(t *testing.T) {
	for _, tc := range []struct{ base, key, want string }{
		{"http://127.0.0.1:7777", "abc", "http://127.0.0.1:7777/s/abc"},
		{"http://127.0.0.1:7777/", "abc", "http://127.0.0.1:7777/s/abc"},
		{"http://[::1]:80", "a/b c", "http://[::1]:80/s/a%2Fb%20c"},
	} {
		if got := web.MonitorURL(tc.base, tc.key); got != tc.want {
			t.Errorf("MonitorURL(%q, %q) = %q, want %q", tc.base, tc.key, got, tc.want)
		}
	}
}

// checkPageSafe asserts what every page owes its viewers: the session name
// escaped, no capability key in the page, and no inline script.
func checkPageSafe(t *testing.T, page, name string) {
	t.Helper()
	if strings.Contains(page, name) || !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("page does not escape the session name:\n%s", page)
	}
	if strings.Contains(page, testKey) {
		t.Errorf("page contains the capability key:\n%s", page)
	}
	if n := strings.Count(page, "<script"); n == 0 || n != strings.Count(page, `<script src="/assets/`) {
		t.Errorf("page has inline script:\n%s", page)
	}
}

// TestHostHeaderChecked: only loopback names and configured public names
// are served, on every route, so a DNS-rebound page of another site cannot
// talk to tandem (issue 6 item 6).
func TestHostHeaderChecked(t *testing.T) {
	base, stop := startStoppable(t, sessions{testKey: newFakeTerm("s")}, nil, "Tandem.Example.com")
	t.Cleanup(func() { _ = stop() })
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	for _, tc := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"localhost:" + port, true},
		{"LOCALHOST", true},
		{"127.0.0.2", true},
		{"[::1]:" + port, true},
		{"tandem.example.com", true},
		{"TANDEM.EXAMPLE.COM:443", true},
		{"evil.example.com:" + port, false},
		{"attacker.localhost.evil.com", false},
		{"192.168.1.10:" + port, false},
	} {
		for _, path := range []string{"/s/" + testKey, "/s/" + testKey + "/ws", "/s/" + testKey + "/cast", "/assets/terminal.js"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			req.Host = tc.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.host, path, err)
			}
			b := body(t, resp)
			resp.Body.Close()
			refused := resp.StatusCode == http.StatusMisdirectedRequest
			if refused == tc.ok {
				t.Errorf("Host %q %s: status %d", tc.host, path, resp.StatusCode)
			}
			if refused && !strings.Contains(b, "publicHosts") {
				t.Errorf("refusal does not say what to do: %q", b)
			}
		}
	}
}
