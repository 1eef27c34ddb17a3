package preview

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/quickack"
)

// enterPath is where a forward's origin trades a ticket for its cookie.
// It is the one path of a forward that is not the session's app.
const enterPath = "/.tandem-preview/enter"

// cookiePrefix begins every forward's cookie name; tandem's own begin
// with "tandem_". Neither kind ever reaches a session's server.
const cookiePrefix = "tpv_"

// forward is one forwarded port: its listener, its proxy, its secret.
type forward struct {
	m      *Manager
	id     string
	secret string // the cookie's value
	info   Forward
	ln     *trackingListener
	srv    *http.Server
	tr     *http.Transport

	stopOnce sync.Once
	stopped  chan struct{}
}

func newForward(m *Manager, key string, port int, dial DialFunc, ln net.Listener) *forward {
	fw := &forward{
		m: m, id: randomID(), secret: randomString(32),
		info:    Forward{Key: key, Port: port, Addr: ln.Addr().String(), Opened: time.Now()},
		ln:      &trackingListener{Listener: ln, conns: map[net.Conn]struct{}{}},
		stopped: make(chan struct{}),
	}
	fw.tr = &http.Transport{
		// Every request goes to the session's port, whatever it names.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			nc, err := dial(ctx, port)
			if err != nil {
				return nil, err
			}
			// A dev server that writes a response in pieces with
			// Nagle's algorithm on would wait 40 ms for each ACK.
			return quickack.Wrap(nc), nil
		},
		Proxy:               nil,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
		// The session's server speaks HTTP/1.1 (a dev server), and the
		// upgrade to a WebSocket needs it.
		ForceAttemptHTTP2: false,
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:        fw.rewrite,
		Transport:      fw.tr,
		ModifyResponse: fw.modifyResponse,
		ErrorHandler:   fw.proxyError,
		ErrorLog:       slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	fw.srv = &http.Server{
		Handler:           fw.handler(proxy),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(m.log.Handler(), slog.LevelDebug),
	}
	return fw
}

// cookieName is the forward's own cookie.
func (fw *forward) cookieName() string { return cookiePrefix + fw.id }

func (fw *forward) serve() {
	err := fw.srv.Serve(fw.ln)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		fw.m.log.Warn("preview: forward stopped serving", "port", fw.info.Port, "err", err)
	}
}

// close ends the listener, every connection it accepted (upgraded
// WebSockets included) and the connections to the session.
func (fw *forward) close() {
	fw.stopOnce.Do(func() {
		close(fw.stopped)
		_ = fw.srv.Close()
		fw.ln.closeAll()
		fw.tr.CloseIdleConnections()
	})
}

// handler serves the entry path and, for a browser with the forward's
// cookie, the session's app; anything else is 401.
func (fw *forward) handler(proxy http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == enterPath {
			fw.enter(w, r)
			return
		}
		if !fw.admitted(r) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, page("Preview: sign in first",
				"This preview opens from tandem's monitoring page, for its signed-in operator or a viewer the operator admitted: open the port's link there."))
			return
		}
		proxy.ServeHTTP(w, r)
	})
}

// admitted reports whether r carries the forward's cookie.
func (fw *forward) admitted(r *http.Request) bool {
	for _, c := range r.CookiesNamed(fw.cookieName()) {
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(fw.secret)) == 1 {
			return true
		}
	}
	return false
}

// enter trades a ticket for the forward's cookie and sends the browser
// where the ticket says, so the ticket leaves the address bar.
func (fw *forward) enter(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	next, ok := fw.m.redeem(fw.id, r.URL.Query().Get("ticket"))
	if r.Method != http.MethodGet || !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, page("Preview: link used or expired",
			"This entry link works once, for a minute. Open the port's link on tandem's monitoring page again."))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     fw.cookieName(),
		Value:    fw.secret,
		Path:     "/",
		HttpOnly: true,
		// Lax: the first request after the entry is the redirect below,
		// and a link from elsewhere to the app's pages works afterwards.
		SameSite: http.SameSiteLaxMode,
		Secure:   r.TLS != nil,
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// rewrite points the request at the session's port and takes out what is
// tandem's: its cookies, every forward's cookie, and tandem's bearer. The
// Host stays the preview's own, so the app builds its links for it.
func (fw *forward) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = "http"
	pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", portString(fw.info.Port))
	pr.Out.Host = pr.In.Host
	stripCookies(pr.Out.Header)
	if v := pr.Out.Header.Get("Authorization"); v != "" && fw.m.opts.TandemCredential != nil {
		if tok, ok := strings.CutPrefix(v, "Bearer "); ok && fw.m.opts.TandemCredential(tok) {
			pr.Out.Header.Del("Authorization")
		}
	}
}

// stripCookies rewrites h's Cookie headers without tandem's cookies and
// any forward's.
func stripCookies(h http.Header) {
	lines := h.Values("Cookie")
	if len(lines) == 0 {
		return
	}
	var keep []string
	for _, line := range lines {
		for _, part := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if ours(name) || strings.TrimSpace(part) == "" {
				continue
			}
			keep = append(keep, strings.TrimSpace(part))
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// ours reports whether a cookie name is tandem's or a forward's. Cookie
// names are case-sensitive, but a browser's cookie jar is not the only
// reader: compare without case.
func ours(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	return strings.HasPrefix(n, "tandem_") || strings.HasPrefix(n, cookiePrefix)
}

// modifyResponse drops the app's cookies that would overwrite tandem's or
// a forward's, and keeps its redirects within the preview.
func (fw *forward) modifyResponse(res *http.Response) error {
	if sc := res.Header.Values("Set-Cookie"); len(sc) > 0 {
		res.Header.Del("Set-Cookie")
		for _, v := range sc {
			name, _, _ := strings.Cut(v, "=")
			if !ours(name) {
				res.Header.Add("Set-Cookie", v)
			}
		}
	}
	if loc := res.Header.Get("Location"); loc != "" {
		res.Header.Set("Location", fw.relocate(loc))
	}
	return nil
}

// relocate makes a redirect to the session's own server (localhost:3000,
// 127.0.0.1:3000, [::1]:3000) relative, so the browser stays on the
// preview's origin; other locations are left as they are.
func (fw *forward) relocate(loc string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" {
		return loc
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}[u.Scheme]
	}
	if port != portString(fw.info.Port) {
		return loc
	}
	switch strings.ToLower(host) {
	case "localhost", "127.0.0.1", "::1", "0.0.0.0":
	default:
		return loc
	}
	rel := &url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery, Fragment: u.Fragment}
	if rel.Path == "" {
		rel.Path = "/"
	}
	return rel.String()
}

// proxyError answers a request the session's server did not: nothing
// listens on the port yet, or the session has ended.
func (fw *forward) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return // the browser went away
	}
	fw.m.log.Debug("preview: upstream failed", "port", fw.info.Port, "err", err)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadGateway)
	fmt.Fprint(w, page("Preview: nothing answers yet",
		fmt.Sprintf("Nothing answers on port %d in the session (%s). Once the server there listens, reload this page.", fw.info.Port, err)))
}

// page is a minimal HTML page; title and text are escaped.
func page(title, text string) string {
	return "<!doctype html><meta charset=utf-8><title>" + html.EscapeString(title) + "</title><p>" + html.EscapeString(text) + "</p>\n"
}

// trackingListener remembers the connections it accepted, so that the
// forward's end closes upgraded ones too (http.Server forgets those).
type trackingListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, l: l}
	l.conns[tc] = struct{}{}
	return tc, nil
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	_ = l.Listener.Close()
	for c := range conns {
		_ = c.(*trackedConn).Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
