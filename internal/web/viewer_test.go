package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// dialAs opens key's terminal socket with extra headers and returns the
// connection and what the server said of its keys. A goroutine reads the
// output, so that pings are answered.
func dialAs(t *testing.T, ctx context.Context, base, key string, hdr http.Header) (*websocket.Conn, string) {
	t.Helper()
	h := http.Header{"Origin": {base}}
	for k, v := range hdr {
		h[k] = v
	}
	c, resp, err := websocket.Dial(ctx, wsURL(base, key), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	go func() {
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	return c, resp.Header.Get(web.InputHeader)
}

// typeAndSync sends input and a resize, then a ping: the server reads one
// connection's messages in order and relays each before reading on, so
// once the pong is back, whatever it did with them is done.
func typeAndSync(t *testing.T, ctx context.Context, c *websocket.Conn, keys string) {
	t.Helper()
	write(t, ctx, c, `{"t":"i","d":"`+keys+`"}`)
	write(t, ctx, c, `{"t":"r","c":11,"r":7}`)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// typingLink asks the dashboard API, as the operator, for the typing link
// of key's page.
func typingLink(t *testing.T, base, key string) string {
	t.Helper()
	status, raw, m := request{method: "POST", path: "/api/admit", body: `{"path":"/s/` + key + `"}`}.do(t, base)
	if status != http.StatusOK {
		t.Fatalf("POST /api/admit: %d %s", status, raw)
	}
	return m["url"].(string)
}

// admitCookieFrom opens a typing link and returns the cookie it sets.
func admitCookieFrom(t *testing.T, base, link string) *http.Cookie {
	t.Helper()
	resp, err := noRedirect.Get(base + link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != link[:strings.IndexByte(link, '?')] {
		t.Fatalf("typing link: %d to %q, want 303 to the bare page", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == "tandem_admit" {
			if c.Path != link[:strings.IndexByte(link, '?')] || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("admit cookie %+v: want HttpOnly, SameSite=Strict, on the session's path", c)
			}
			return c
		}
	}
	t.Fatalf("the typing link set no cookie: %v", resp.Header)
	return nil
}

// TestWebSocketInputNeedsOperator: with an operator configured, the
// monitoring key alone watches: its keys and resizes are dropped at the
// server. The operator (cookie or bearer token) and a guest with the
// session's typing link type.
func TestWebSocketInputNeedsOperator(t *testing.T) {
	const otherKey = "k-0000000000000000000000000000other"
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), sessions{
		testKey: newFakeTerm("victim"), otherKey: newFakeTerm("other"),
	})
	link := typingLink(t, base, testKey)
	admitted := admitCookieFrom(t, base, link)
	other := admitCookieFrom(t, base, typingLink(t, base, otherKey))
	cookie := func(c *http.Cookie) http.Header { return http.Header{"Cookie": {c.Name + "=" + c.Value}} }

	cases := []struct {
		name   string
		hdr    http.Header
		typing bool
	}{
		{"the key alone", nil, false},
		{"tandem attach without the token", http.Header{"User-Agent": {"tandem-attach"}}, false},
		{"a wrong operator cookie", http.Header{"Cookie": {"tandem_operator=" + operatorToken + "x"}}, false},
		{"a wrong bearer token", http.Header{"Authorization": {"Bearer nope"}}, false},
		{"another session's typing link", cookie(other), false},
		{"a forged typing link", http.Header{"Cookie": {"tandem_admit=" + strings.Repeat("A", 43)}}, false},
		{"the operator's cookie", http.Header{"Cookie": {"tandem_operator=" + operatorToken}}, true},
		{"the operator token as bearer", http.Header{"Authorization": {"Bearer " + operatorToken}, "User-Agent": {"tandem-attach"}}, true},
		{"the session's typing link", cookie(admitted), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			term := newFakeTerm("victim")
			base := startDashboard(t, testOperator(newBroker(), newDirectory()), sessions{testKey: term, otherKey: newFakeTerm("other")})
			ctx := testContext(t)
			conn, said := dialAs(t, ctx, base, testKey, c.hdr)
			typeAndSync(t, ctx, conn, `touch pwn\r`)
			input, sizes := term.snapshot()
			if c.typing {
				if said != web.InputTyping || input != "touch pwn\r" || len(sizes) != 1 {
					t.Errorf("header %q, input %q, sizes %v: want typing, the keys and the resize", said, input, sizes)
				}
				return
			}
			if said != web.InputWatching || input != "" || len(sizes) != 0 {
				t.Errorf("header %q, input %q, sizes %v: want watching, nothing typed, no resize", said, input, sizes)
			}
		})
	}
}

// TestTypingLinkChecks: only the operator makes typing links, only for a
// live session's page; a wrong token in a link sets no cookie.
func TestTypingLinkChecks(t *testing.T) {
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), sessions{testKey: newFakeTerm("s")})
	for _, c := range []struct {
		name   string
		rq     request
		status int
	}{
		{"no cookie", request{method: "POST", path: "/api/admit", body: `{"path":"/s/` + testKey + `"}`, cookie: "-"}, http.StatusUnauthorized},
		{"cross origin", request{method: "POST", path: "/api/admit", body: `{"path":"/s/` + testKey + `"}`, header: map[string]string{"Origin": "http://evil.example"}}, http.StatusForbidden},
		{"unknown session", request{method: "POST", path: "/api/admit", body: `{"path":"/s/k-nope"}`}, http.StatusNotFound},
		{"not a page", request{method: "POST", path: "/api/admit", body: `{"path":"/api/state"}`}, http.StatusBadRequest},
	} {
		if status, raw, _ := c.rq.do(t, base); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, raw, c.status)
		}
	}
	resp, err := noRedirect.Get(web.MonitorURL(base, testKey) + "?admit=" + strings.Repeat("A", 43))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(resp.Cookies()) != 0 || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a wrong typing link: %d, cookies %v; want a redirect to the page and no cookie", resp.StatusCode, resp.Cookies())
	}
}

// TestBrowserWatchOnly: a page opened with the key alone says in one line
// why it cannot type, and what is typed there reaches nothing; the
// operator's signed-in page types, and makes a typing link that lets a
// guest's browser type too.
func TestBrowserWatchOnly(t *testing.T) {
	term := newFakeTerm("shared")
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), sessions{testKey: term})

	guest := openTerminal(t, base)
	line, err := chromedp.Run(guest, chromedp.Evaluate[string](`document.getElementById("watching")?.textContent ?? ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(line, "Watching only") || !strings.Contains(line, "operator") {
		t.Errorf("the watch-only line says %q", line)
	}
	if err := chromedp.Do(guest, chromedp.Focus(textarea), testenv.TypeKeys("touch pwn\n")); err != nil {
		t.Fatalf("type: %v", err)
	}

	op := openDashboard(t, base)
	if err := chromedp.Do(op, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatal(err)
	}
	poll(t, op, `window.tandem && window.tandem.status() === "live" && window.tandem.typing && !document.getElementById("watching")`)
	if err := chromedp.Do(op, chromedp.Focus(textarea), testenv.TypeKeys("echo op\n")); err != nil {
		t.Fatalf("type: %v", err)
	}
	term.waitInput(t, "echo op\r")
	if input, _ := term.snapshot(); input != "echo op\r" {
		t.Errorf("input %q: the watching page typed", input)
	}

	// The operator admits the guest: the typing link, opened in the
	// guest's browser, lets it type.
	if err := chromedp.Do(op, chromedp.Click("#admit")); err != nil {
		t.Fatal(err)
	}
	poll(t, op, `document.getElementById("admit-url").value.includes("?admit=")`)
	link, err := chromedp.Run(op, chromedp.Evaluate[string](`document.getElementById("admit-url").value`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(guest, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	poll(t, guest, `window.tandem && window.tandem.status() === "live" && window.tandem.typing && location.search === ""`)
	if err := chromedp.Do(guest, chromedp.Focus(textarea), testenv.TypeKeys("echo guest\n")); err != nil {
		t.Fatalf("type: %v", err)
	}
	term.waitInput(t, "echo op\recho guest\r")
	if input, _ := term.snapshot(); input != "echo op\recho guest\r" {
		t.Errorf("input %q", input)
	}
}

// deskTerm is a fake terminal whose agent asked for the human: it
// records the hand-backs it is given.
type deskTerm struct {
	*fakeTerm
	mu   sync.Mutex
	back []string // "id|note|viewer"
}

func (d *deskTerm) HumanRequest() (string, string, bool) { return "hr_1", "enter the password", true }

func (d *deskTerm) HandBack(ctx context.Context, id, note string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.back = append(d.back, id+"|"+note+"|"+web.ViewerFrom(ctx))
	return nil
}

func (d *deskTerm) WatchHumanRequest(func()) func() { return func() {} }

func (d *deskTerm) handedBack() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.back...)
}

type deskSessions map[string]*deskTerm

func (s deskSessions) Terminal(key string) (web.Terminal, bool) {
	t, ok := s[key]
	return t, ok
}

// TestHandBackNeedsTyping: only a viewer who may type hands the session
// back to the agent; a watcher's hand-back (the agent holds the watch
// link too, and could free itself) is dropped like its keys.
func TestHandBackNeedsTyping(t *testing.T) {
	term := &deskTerm{fakeTerm: newFakeTerm("held")}
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), deskSessions{testKey: term})
	ctx := testContext(t)
	watcher, said := dialAs(t, ctx, base, testKey, nil)
	if said != web.InputWatching {
		t.Fatalf("the watcher was told %q", said)
	}
	write(t, ctx, watcher, `{"t":"b","id":"hr_1","n":"free me"}`)
	if err := watcher.Ping(ctx); err != nil { // its messages are read in order
		t.Fatal(err)
	}
	if got := term.handedBack(); len(got) != 0 {
		t.Fatalf("a watcher handed back: %q", got)
	}
	op, _ := dialAs(t, ctx, base, testKey, http.Header{"Cookie": {"tandem_operator=" + operatorToken}})
	write(t, ctx, op, `{"t":"b","id":"hr_1","n":"done"}`)
	write(t, ctx, op, `{"t":"b","id":"","n":"no id"}`)
	if err := op.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if got := term.handedBack(); len(got) != 1 || !strings.HasPrefix(got[0], "hr_1|done|operator ") {
		t.Fatalf("the operator's hand-back: %q", got)
	}
}

// TestTypingLinkRecorded: a typing link is recorded before it is handed
// out, with its session's key; when it cannot be recorded, none is made.
func TestTypingLinkRecorded(t *testing.T) {
	var (
		mu   sync.Mutex // the handler runs on the server's goroutine
		got  []string
		fail bool
	)
	op := testOperator(newBroker(), newDirectory())
	op.Admitted = func(_ context.Context, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return errors.New("disk full")
		}
		got = append(got, key)
		return nil
	}
	base := startDashboard(t, op, sessions{testKey: newFakeTerm("s")})
	link := typingLink(t, base, testKey)
	mu.Lock()
	if !strings.Contains(link, "?admit=") || len(got) != 1 || got[0] != testKey {
		t.Fatalf("link %q, recorded %v", link, got)
	}
	fail = true
	mu.Unlock()
	status, raw, m := request{method: "POST", path: "/api/admit", body: `{"path":"/s/` + testKey + `"}`}.do(t, base)
	if status != http.StatusServiceUnavailable || m["url"] != nil || !strings.Contains(string(raw), "audit_unavailable") {
		t.Errorf("with the record failing: %d %s", status, raw)
	}
}
