package preview_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/preview"
)

// app is the session's dev server of these tests: a page, a redirect to
// its own absolute URL, cookies, and a WebSocket echo. It records the
// headers each request brought.
type app struct {
	port int
	mu   sync.Mutex
	seen []http.Header
}

func startApp(t *testing.T) *app {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &app{port: ln.Addr().(*net.TCPAddr).Port}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Clone())
		a.mu.Unlock()
		fmt.Fprintf(w, "page %s host %s", r.URL.Path, r.Host)
	})
	mux.HandleFunc("/go", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(a.port)+"/landed?x=1", http.StatusFound)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/cookies", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "app", Value: "1", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "tandem_operator", Value: "forged", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "TPV_x", Value: "forged", Path: "/"})
		fmt.Fprint(w, "cookies set")
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo "), b...)); err != nil {
				return
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

// headers returns what the app's requests carried so far.
func (a *app) headers() []http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]http.Header(nil), a.seen...)
}

func direct(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// browser is an HTTP client with a cookie jar, which like a browser's
// sends a host's cookies to all its ports.
func browser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, url string) (int, string, *http.Response) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, string(b), res
}

func newManager(t *testing.T, o *preview.Options) *preview.Manager {
	m := preview.New(o)
	t.Cleanup(func() { m.Close() })
	return m
}

// TestForwardEntersOnceAndProxies: the forward's origin answers 401
// without its cookie; a ticket lets a browser in once and lands it on the
// path asked for; the app's page, redirect (made relative) and WebSocket
// work through it; a used ticket does not open it again.
func TestForwardEntersOnceAndProxies(t *testing.T) {
	a := startApp(t)
	m := newManager(t, nil)
	fw, created, err := m.Open("key1", a.port, direct, nil)
	if err != nil || !created {
		t.Fatalf("open: %v %v", created, err)
	}
	base := "http://" + fw.Addr
	b := browser(t)
	if code, _, _ := get(t, b, base+"/"); code != http.StatusUnauthorized {
		t.Fatalf("without the cookie: %d, want 401", code)
	}
	// A browser that named tandem localhost goes to the forward's own
	// address (localhost may resolve to ::1 first).
	enter, err := m.Enter("key1", a.port, "localhost", "/hello?q=1")
	if err != nil {
		t.Fatal(err)
	}
	code, body, res := get(t, b, enter)
	if code != 200 || !strings.HasPrefix(body, "page /hello host "+fw.Addr) || res.Request.URL.String() != base+"/hello?q=1" {
		t.Fatalf("entering: %d %q at %s", code, body, res.Request.URL)
	}
	// The redirect to the app's own localhost URL stays in the preview.
	if code, body, res := get(t, b, base+"/go"); code != 200 || res.Request.URL.String() != base+"/landed?x=1" || !strings.HasPrefix(body, "page /landed") {
		t.Errorf("redirect: %d %q at %s", code, body, res.Request.URL)
	}
	nr := &http.Client{Jar: b.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if _, _, res := get(t, nr, base+"/away"); res.Header.Get("Location") != "http://example.invalid/" {
		t.Errorf("a redirect elsewhere was changed: %q", res.Header.Get("Location"))
	}
	// The WebSocket echoes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+fw.Addr+"/ws", &websocket.DialOptions{HTTPClient: b})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.Read(ctx); err != nil || string(got) != "echo hi" {
		t.Errorf("websocket echo: %q %v", got, err)
	}
	// The ticket was used: a fresh browser cannot use it again.
	if code, _, _ := get(t, browser(t), enter); code != http.StatusForbidden {
		t.Errorf("a used ticket: %d, want 403", code)
	}
	if code, _, _ := get(t, browser(t), base+"/.tandem-preview/enter?ticket=made-up"); code != http.StatusForbidden {
		t.Errorf("a made-up ticket: %d, want 403", code)
	}
}

// TestForwardKeepsTandemsOwn: tandem's cookies, every forward's cookie and
// tandem's bearer never reach the app; the app cannot set cookies of
// those names; its own cookies pass.
func TestForwardKeepsTandemsOwn(t *testing.T) {
	a := startApp(t)
	m := newManager(t, &preview.Options{TandemCredential: func(v string) bool { return v == "operator-token" }})
	fw, _, err := m.Open("key1", a.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := browser(t)
	enter, _ := m.Enter("key1", a.port, "", "/cookies")
	code, _, res := get(t, b, enter)
	if code != 200 {
		t.Fatalf("entering: %d", code)
	}
	for _, c := range res.Cookies() {
		if c.Name != "app" {
			t.Errorf("the app set cookie %s", c.Name)
		}
	}
	base := "http://" + fw.Addr
	req, _ := http.NewRequest("GET", base+"/check", nil)
	req.Header.Set("Authorization", "Bearer operator-token")
	req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: "secret"})
	req.AddCookie(&http.Cookie{Name: "Tandem_Admit", Value: "secret"})
	req.AddCookie(&http.Cookie{Name: "tpv_0123456789abcdef", Value: "another-forward"})
	res, err = b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("with the cookie: %d", res.StatusCode)
	}
	seen := a.headers()
	last := seen[len(seen)-1]
	if got := last.Values("Cookie"); len(got) != 1 || got[0] != "app=1" {
		t.Errorf("the app got cookies %q, want its own only", got)
	}
	if got := last.Get("Authorization"); got != "" {
		t.Errorf("the app got tandem's bearer: %q", got)
	}
	for _, h := range seen {
		if strings.Contains(strings.Join(h.Values("Cookie"), ";"), "tpv_") {
			t.Errorf("a forward's cookie reached the app: %v", h.Values("Cookie"))
		}
	}
}

// TestForwardCookieOpensItsOwnOnly: a browser let into one forward (of
// one session) is not let into another forward of the same or another
// session, though it sends them the same cookies.
func TestForwardCookieOpensItsOwnOnly(t *testing.T) {
	a1, a2 := startApp(t), startApp(t)
	m := newManager(t, nil)
	f1, _, err := m.Open("key1", a1.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	f2, _, err := m.Open("key1", a2.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	f3, _, err := m.Open("key2", a1.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := browser(t)
	enter, _ := m.Enter("key1", a1.port, "", "/")
	if code, _, _ := get(t, b, enter); code != 200 {
		t.Fatalf("entering the first: %d", code)
	}
	for _, other := range []preview.Forward{f2, f3} {
		if code, _, _ := get(t, b, "http://"+other.Addr+"/"); code != http.StatusUnauthorized {
			t.Errorf("the first forward's cookie opens %s (%s): %d", other.Addr, other.Key, code)
		}
	}
	if code, _, _ := get(t, b, "http://"+f1.Addr+"/"); code != 200 {
		t.Errorf("its own forward: %d", code)
	}
	// A ticket is for its forward only: redeemed at another, it fails
	// there and is used up.
	enter, _ = m.Enter("key1", a2.port, "", "/")
	wrong := strings.Replace(enter, f2.Addr, f1.Addr, 1)
	if code, _, _ := get(t, browser(t), wrong); code != http.StatusForbidden {
		t.Errorf("a ticket of another forward: %d, want 403", code)
	}
	if _, err := m.Enter("key2", a2.port, "", "/"); !errors.Is(err, preview.ErrNotForwarded) {
		t.Errorf("enter a port the session does not forward: %v", err)
	}
}

// TestForwardsEndWithTheSession: the forwards of a session close when its
// done channel does, each reported; the listener is gone and an open
// WebSocket through it ends. The port limit and range hold.
func TestForwardsEndWithTheSession(t *testing.T) {
	a := startApp(t)
	closed := make(chan preview.Forward, 16)
	m := newManager(t, &preview.Options{MaxPerSession: 2, Closed: func(f preview.Forward, reason string) {
		if reason == "session_ended" {
			closed <- f
		}
	}})
	done := make(chan struct{})
	fw, _, err := m.Open("key1", a.port, direct, done)
	if err != nil {
		t.Fatal(err)
	}
	if again, created, err := m.Open("key1", a.port, direct, done); err != nil || created || again.Addr != fw.Addr {
		t.Errorf("forwarding the same port again: %v %v %v", again, created, err)
	}
	if _, _, err := m.Open("key1", 1, direct, done); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Open("key1", 2, direct, done); !errors.Is(err, preview.ErrTooMany) {
		t.Errorf("a third forward: %v, want ErrTooMany", err)
	}
	for _, p := range []int{0, -1, 65536} {
		if _, _, err := m.Open("key1", p, direct, done); !errors.Is(err, preview.ErrBadPort) {
			t.Errorf("port %d: %v, want ErrBadPort", p, err)
		}
	}
	b := browser(t)
	enter, _ := m.Enter("key1", a.port, "", "/")
	if code, _, _ := get(t, b, enter); code != 200 {
		t.Fatalf("entering: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+fw.Addr+"/ws", &websocket.DialOptions{HTTPClient: b})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()

	close(done)
	for range 2 {
		select {
		case <-closed:
		case <-ctx.Done():
			t.Fatal("the forwards were not reported closed")
		}
	}
	if _, _, err := ws.Read(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("the WebSocket outlived its forward: %v", err)
	}
	if c, err := net.DialTimeout("tcp", fw.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the forward's listener outlived the session")
	}
	if got := m.List("key1"); len(got) != 0 {
		t.Errorf("forwards listed after the session: %v", got)
	}
	if _, _, err := m.Open("key1", a.port, direct, done); err == nil {
		t.Errorf("a forward opened for an ended session")
	}
}

// TestForwardNothingListening: a port nothing listens on yet answers
// 502 with a page that says so, and works once something listens.
func TestForwardNothingListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	m := newManager(t, nil)
	fw, _, err := m.Open("key1", port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := browser(t)
	enter, _ := m.Enter("key1", port, "", "/")
	code, body, _ := get(t, b, enter)
	if code != http.StatusBadGateway || !strings.Contains(body, "Nothing answers on port "+strconv.Itoa(port)) {
		t.Fatalf("nothing listening: %d %q", code, body)
	}
	ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "up") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	if code, body, _ := get(t, b, "http://"+fw.Addr+"/"); code != 200 || body != "up" {
		t.Errorf("once listening: %d %q", code, body)
	}
}

// TestForwardOverTLS: with tandem's listener on TLS, a forward serves
// HTTPS with the same certificate, and its entry URL says https.
func TestForwardOverTLS(t *testing.T) {
	a := startApp(t)
	certSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(certSrv.Close)
	m := newManager(t, &preview.Options{TLS: certSrv.TLS})
	fw, _, err := m.Open("key1", a.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The certificate names the host the browser used: the URL keeps it.
	enter, err := m.Enter("key1", a.port, "127.0.0.1", "/tls")
	if err != nil || !strings.HasPrefix(enter, "https://"+fw.Addr+"/") {
		t.Fatalf("entry URL %q, %v", enter, err)
	}
	b := certSrv.Client()
	b.Jar, _ = cookiejar.New(nil)
	code, body, res := get(t, b, enter)
	if code != 200 || !strings.HasPrefix(body, "page /tls") || res.TLS == nil {
		t.Fatalf("over TLS: %d %q (TLS %v)", code, body, res.TLS != nil)
	}
	for _, c := range b.Jar.Cookies(res.Request.URL) {
		if strings.HasPrefix(c.Name, "tpv_") {
			return
		}
	}
	t.Error("no forward cookie over TLS")
}

// TestForwardsOwnLoopbackHosts: on 127.0.0.1 without TLS every forward
// listens on a loopback address of its own (a host of its own for the
// browser's cookies), never tandem's 127.0.0.1 or another forward's; an
// app's cookie set through one forward is not sent through another by a
// client that keeps cookies by host, as browsers do.
func TestForwardsOwnLoopbackHosts(t *testing.T) {
	a, b := startApp(t), startApp(t)
	m := newManager(t, nil)
	hosts := map[string]bool{}
	var fws []preview.Forward
	for i, key := range []string{"tenantA", "tenantB", "tenantB"} {
		port := a.port
		if i > 0 {
			port = b.port + i - 1 // tenantB's second forward need not answer
		}
		fw, _, err := m.Open(key, port, direct, nil)
		if err != nil {
			t.Fatal(err)
		}
		h, _, _ := net.SplitHostPort(fw.Addr)
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsLoopback() || ip.To4() == nil || strings.HasPrefix(h, "127.0.") || hosts[h] {
			t.Fatalf("forward %d of %s listens on %s: want a 127/8 address of its own outside 127.0.0.0/16 (have %v)", i, key, fw.Addr, hosts)
		}
		hosts[h] = true
		fws = append(fws, fw)
	}
	// A's app sets its cookie; B is entered at a page that sets none, then
	// sets its own, then is asked again.
	c := browser(t)
	for i, next := range []string{"/cookies", "/first"} {
		u, err := m.Enter([]string{"tenantA", "tenantB"}[i], fws[i].Port, "127.0.0.1", next)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(u, "http://"+fws[i].Addr+"/") {
			t.Fatalf("enter URL %s is not on the forward's own address %s", u, fws[i].Addr)
		}
		if code, _, _ := get(t, c, u); code != http.StatusOK {
			t.Fatalf("enter %s: %d", u, code)
		}
	}
	for _, p := range []string{"/cookies", "/again"} {
		if code, _, _ := get(t, c, "http://"+fws[1].Addr+p); code != http.StatusOK {
			t.Fatalf("tenant B's %s: %d", p, code)
		}
	}
	seen := b.headers() // /first and /again
	if first := seen[0].Get("Cookie"); strings.Contains(first, "app=") {
		t.Fatalf("tenant B's app got %q before it set a cookie: tenant A's", first)
	}
	last := seen[len(seen)-1].Get("Cookie")
	if last != "app=1" {
		t.Errorf("tenant B's app got cookies %q, want only its own app=1 (tenant A's would make two)", last)
	}

	// Over TLS the certificate names one host: forwards share it.
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	tm := newManager(t, &preview.Options{TLS: ts.TLS})
	fw, _, err := tm.Open("k", a.port, direct, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := net.SplitHostPort(fw.Addr); h != "127.0.0.1" {
		t.Errorf("with TLS a forward listens on %s, want the configured 127.0.0.1", fw.Addr)
	}
}
