package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Credential is what the proxy adds to the requests a session sends to
// one host, so that the secret never enters the session: network.
// credentials in tandem.yaml. It is added only on an inspected (TLS)
// connection, never to plain HTTP.
type Credential struct {
	// Name names the credential in records and replies (never its value).
	Name string
	// Host is the host it is for, in the allowlist's entry syntax.
	Host string
	// Path, when set, limits it to requests whose path starts with it.
	Path string
	// Header is the header's name; Value its value, the secret in it.
	Header, Value string
	// Replace lets it overwrite a header the request brings; without it
	// such a request is refused (the program is probing).
	Replace bool
	// RootCAs verifies the host's certificate; nil: the system's roots.
	RootCAs *x509.CertPool

	rule Rule
}

// CheckCredentialHost checks a credential's host as an allowlist entry.
func CheckCredentialHost(host string) error {
	_, err := parseRule(strings.TrimSpace(host))
	return err
}

// matches reports whether the credential applies to host:port.
func (c Credential) matches(host string, port uint16) bool {
	a := Allowlist{rules: []Rule{c.rule}}
	if addr, err := netip.ParseAddr(host); err == nil {
		_, ok := a.matchAddr(addr, port)
		return ok
	}
	_, ok := a.matchName(host, port)
	return ok
}

// prepareInspection parses the session's credentials and, when it has
// any or a rule that judges requests, makes its CA.
func prepareInspection(s *Session) (*CA, error) {
	var names []string
	var nets []netip.Prefix
	add := func(r Rule) {
		if r.Name != "" {
			names = append(names, r.Name)
		} else {
			nets = append(nets, r.Net)
		}
	}
	for i := range s.Credentials {
		c := &s.Credentials[i]
		r, err := parseRule(strings.TrimSpace(c.Host))
		if err != nil {
			return nil, fmt.Errorf("credential %q: %w", c.Name, err)
		}
		c.rule = r
		add(r)
	}
	for _, r := range s.Allow.rules {
		if r.Judged() {
			add(r)
		}
	}
	if len(names) == 0 && len(nets) == 0 {
		return nil, nil
	}
	return NewCA(s.Name, names, nets)
}

// CA is the session's certificate authority; nil when the session
// inspects no host.
func (l *Listener) CA() *CA { return l.ca }

// inspection says whether a connection to host:port is inspected: the
// allowlist rule that let it through (zero for a human's yes) and the
// credentials that apply to it.
func (l *Listener) inspection(host string, port uint16) (Rule, []Credential, bool) {
	if l.ca == nil {
		return Rule{}, nil, false
	}
	var rule Rule
	if a, err := netip.ParseAddr(host); err == nil {
		rule, _ = l.s.Allow.matchAddr(a, port)
	} else {
		rule, _ = l.s.Allow.matchName(host, port)
	}
	var creds []Credential
	for _, c := range l.s.Credentials {
		if c.matches(host, port) {
			creds = append(creds, c)
		}
	}
	return rule, creds, len(creds) > 0 || rule.Judged()
}

// credentialNames names creds for records.
func credentialNames(creds []Credential) string {
	var n []string
	for _, c := range creds {
		n = append(n, c.Name)
	}
	return strings.Join(n, ", ")
}

// bufConn reads what a bufio.Reader already holds before the connection.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// oneConn is a net.Listener that hands out one connection, then waits
// until closed: http.Server serving a single inspected connection.
type oneConn struct {
	c    chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newOneConn(c net.Conn) *oneConn {
	l := &oneConn{c: make(chan net.Conn, 1), done: make(chan struct{}), addr: c.LocalAddr()}
	l.c <- c
	return l
}

func (l *oneConn) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return l.addr }

// handshakeTimeout bounds the session's TLS handshake with the proxy.
const handshakeTimeout = 30 * time.Second

// upstreamError is a failure to reach the host over verified TLS.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// inspect serves an inspected tunnel: it ends the session's TLS with a
// certificate of the session's CA for c.Host, reads each HTTP/1.1 or HTTP/2
// request, judges it (the host it names, the rule's methods and paths,
// the credential's header), adds the credential and sends it on over a
// TLS connection of its own, verified against the system's roots or the
// credential's CA, in HTTP/2 where the host offers it. It returns the
// bytes sent and received upstream.
func (l *Listener) inspect(c Conn, down net.Conn, addrs []netip.Addr, rule Rule, creds []Credential) (int64, int64) {
	var upN, downN atomic.Int64
	bc := &batchConn{Conn: down, bufs: (*copyBufs)(l.p)}
	tc := tls.Server(bc, &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Full records from the first byte: the session is on loopback.
		DynamicRecordSizingDisabled: true,
		// HTTP/2 where the program offers it (git and Go do): net/http's
		// server speaks it on this connection, and each stream is a
		// request judged like any other.
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sni := strings.TrimSuffix(strings.ToLower(h.ServerName), ".")
			if sni != c.Host && !(sni == "" && isAddr(c.Host)) {
				// Reported before the program hears of it (the alert).
				l.refuseRequest(c, "", "", fmt.Sprintf("domain fronting: the TLS server name %q differs from the host %s the tunnel was opened to", sni, c.Host))
				return nil, fmt.Errorf("TLS server name %q is not the host %s the tunnel was opened to", sni, c.Host)
			}
			return l.ca.Leaf(c.Host)
		},
	})
	hctx, cancel := context.WithTimeout(l.ctx, handshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return 0, 0
	}
	roots := (*x509.CertPool)(nil)
	for _, cr := range creds {
		if cr.RootCAs != nil {
			roots = cr.RootCAs
			break
		}
	}
	tr := &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			raw, err := l.dial(ctx, addrs, c.Port)
			if err != nil {
				return nil, &upstreamError{err}
			}
			cc := newCountConn(raw, (*copyBufs)(l.p), &upN, &downN)
			// HTTP/2 where the host offers it by ALPN (the transport
			// takes an h2 connection over from here), else HTTP/1.1.
			t := tls.Client(cc, &tls.Config{ServerName: c.Host, RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12})
			if err := t.HandshakeContext(ctx); err != nil {
				_ = raw.Close()
				return nil, &upstreamError{fmt.Errorf("the host's TLS could not be verified: %w", err)}
			}
			return t, nil
		},
		ForceAttemptHTTP2:     true, // with DialTLSContext, h2 only when forced
		DisableCompression:    true,
		ResponseHeaderTimeout: 5 * time.Minute,
		MaxIdleConnsPerHost:   1,
	}
	defer tr.CloseIdleConnections()
	h := &inspector{l: l, c: c, rule: rule, creds: creds, tr: tr, batch: bc}
	ln := newOneConn(tc)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(l.p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return l.ctx },
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				_ = ln.Close()
			}
		},
	}
	_ = srv.Serve(ln)
	_ = tc.Close()
	return upN.Load(), downN.Load()
}

func isAddr(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// refuseRequest reports one request refused on an inspected connection.
func (l *Listener) refuseRequest(c Conn, method, path, reason string) Conn {
	r := Conn{ID: strconv.FormatUint(l.p.nextID.Add(1), 36), Session: c.Session, Host: c.Host, Port: c.Port, Addr: c.Addr,
		Decision: Refused, Reason: reason, DecidedBy: ByAllowlist, Method: method, Path: path, Started: time.Now(), Inspected: true}
	l.report(r)
	return r
}

// inspector judges and forwards the requests of one inspected connection.
type inspector struct {
	l     *Listener
	c     Conn
	rule  Rule
	creds []Credential
	tr    *http.Transport
	batch *batchConn // the session's side of the connection
}

// judge says why a request may not go, or "", and the credential to add;
// ruled says the refusal is the entry's methods or paths (which a human
// may overrule, with ask).
func (h *inspector) judge(r *http.Request) (why string, cred *Credential, ruled bool) {
	if why := h.judgeFrame(r); why != "" {
		return why, nil, false
	}
	if why := h.rule.judgeRequest(r.Method, r.URL.Path); why != "" {
		return why, nil, true
	}
	why, cred = h.credential(r)
	return why, cred, false
}

// judgeFrame says why a request is refused whatever the rules: another
// host than the tunnel's (fronting), CONNECT, an upgrade, not HTTP/1.
func (h *inspector) judgeFrame(r *http.Request) string {
	host, port := r.Host, ""
	if hh, pp, err := net.SplitHostPort(r.Host); err == nil {
		host, port = hh, pp
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host != h.c.Host || (port != "" && port != strconv.Itoa(int(h.c.Port))) {
		return fmt.Sprintf("domain fronting: the request's Host %q is not %s, the host its TLS connection was opened to", r.Host, h.c.Target())
	}
	if r.URL.IsAbs() && (!strings.EqualFold(r.URL.Hostname(), h.c.Host) || r.URL.Scheme != "https") {
		return fmt.Sprintf("the request names %s://%s, not %s", r.URL.Scheme, r.URL.Host, h.c.Host)
	}
	switch {
	case r.Method == http.MethodConnect:
		return "CONNECT inside an inspected connection"
	case r.Header.Get("Upgrade") != "":
		return "protocol upgrades (Upgrade: " + r.Header.Get("Upgrade") + ") are not passed on inspected connections"
	case r.ProtoMajor != 1 && r.ProtoMajor != 2:
		return "only HTTP/1.x and HTTP/2 are passed on inspected connections"
	}
	return ""
}

// credential picks the credential for r, or says why r is refused: it
// brings the credential's header itself.
func (h *inspector) credential(r *http.Request) (string, *Credential) {
	for i := range h.creds {
		cr := &h.creds[i]
		if cr.Path != "" && (cleanPath(r.URL.Path) != r.URL.Path || !strings.HasPrefix(r.URL.Path, cr.Path)) {
			continue
		}
		if len(r.Header.Values(cr.Header)) > 0 && !cr.Replace {
			return fmt.Sprintf("the request brings its own %s header, which tandem sets for this host (credential %q); it is refused rather than overwritten", cr.Header, cr.Name), nil
		}
		return "", cr
	}
	return "", nil
}

func (h *inspector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	why, cred, ruled := h.judge(r)
	if why != "" && ruled && h.l.s.AskRequest != nil {
		if c, ok := h.ask(r, why); !ok {
			w.Header().Set("X-Tandem-Refused", c.Decision)
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("tandem's egress proxy refused %s %s%s: %s", r.Method, h.c.Host, r.URL.Path, c.Reason), http.StatusForbidden)
			return
		}
		why, cred = h.credential(r)
	}
	if why != "" {
		h.l.refuseRequest(h.c, r.Method, r.URL.Path, why)
		w.Header().Set("X-Tandem-Refused", Refused)
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("tandem's egress proxy refused %s %s%s: %s", r.Method, h.c.Host, r.URL.Path, why), http.StatusForbidden)
		return
	}
	hostport := h.c.Host
	if h.c.Port != 443 {
		hostport = net.JoinHostPort(h.c.Host, strconv.Itoa(int(h.c.Port)))
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", hostport
			pr.Out.Host = r.Host
			pr.Out.RequestURI = ""
			if cred != nil {
				pr.Out.Header.Set(cred.Header, cred.Value)
			}
		},
		Transport:     h.tr,
		FlushInterval: -1,
		BufferPool:    (*copyBufs)(h.l.p),
		ErrorLog:      slog.NewLogLogger(h.l.p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var ue *upstreamError
			if errors.As(err, &ue) {
				h.l.refuseRequest(h.c, r.Method, r.URL.Path, ue.Error())
				w.Header().Set("X-Tandem-Refused", Refused)
				http.Error(w, fmt.Sprintf("tandem's egress proxy refused %s %s%s: %v", r.Method, h.c.Host, r.URL.Path, ue), http.StatusBadGateway)
				return
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
				return
			}
			http.Error(w, "tandem's egress proxy: "+h.c.Target()+": "+err.Error(), http.StatusBadGateway)
		},
	}
	// The upstream connection the request goes out on, for fillReader.
	var up atomic.Pointer[countConn]
	r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if tc, ok := i.Conn.(*tls.Conn); ok {
			if cc, ok := tc.NetConn().(*countConn); ok {
				up.Store(cc)
			}
		}
	}}))
	rp.ModifyResponse = func(resp *http.Response) error {
		if cc := up.Load(); cc != nil && resp.ProtoMajor == 1 {
			resp.Body = &fillReader{ReadCloser: resp.Body, up: cc}
		}
		return nil
	}
	if r.ProtoMajor != 1 {
		// HTTP/2's frames are written by the connection's own goroutine,
		// and a write of this stream can wait for the program's window
		// update, which a batch held back would never bring: no batches.
		rp.ServeHTTP(w, r)
		return
	}
	rp.ServeHTTP(batchWriter{w, h.batch}, r)
}

// TrustBundle is what the session's programs trust: the system's roots
// and the session CA's certificate (never its key); nil when the session
// inspects no host.
func (l *Listener) TrustBundle() []byte {
	if l.ca == nil {
		return nil
	}
	return l.ca.TrustBundle()
}

// ask holds a request the entry's rules refuse (why) for a human, and
// reports the answer as a request of its own (method and path): approved,
// or denied with the reason and who decided.
func (h *inspector) ask(r *http.Request, why string) (Conn, bool) {
	l := h.l
	c := Conn{ID: strconv.FormatUint(l.p.nextID.Add(1), 36), Session: h.c.Session, Host: h.c.Host, Port: h.c.Port, Addr: h.c.Addr,
		Method: r.Method, Path: r.URL.Path, Started: time.Now(), Inspected: true}
	if !l.take(&l.asking, MaxAsking) {
		c.Decision, c.DecidedBy = Refused, ByAllowlist
		c.Reason = fmt.Sprintf("%s, and %d connections of this session already wait for a human; retry once they are decided", why, MaxAsking)
		l.report(c)
		return c, false
	}
	yes, err := l.s.AskRequest(r.Context(), h.c.Host, h.c.Port, r.Method, r.URL.Path, why)
	l.give(&l.asking)
	if err != nil || !yes {
		c.deny(err)
		l.report(c)
		return c, false
	}
	c.Decision, c.Reason, c.Ended = Approved, "a human let it through", true
	l.report(c)
	return c, true
}

// copyBufs lends an inspected connection's ReverseProxy the proxy's
// large copy buffers, within the same budget as the tunnels (maxBigBufs),
// and a small one when it is in use.
type copyBufs Proxy

func (c *copyBufs) Get() []byte {
	p := (*Proxy)(c)
	select {
	case p.bigSlots <- struct{}{}:
		return p.bufs.Get().(*[copyBuf]byte)[:]
	default:
		return make([]byte, smallBuf)
	}
}

func (c *copyBufs) Put(b []byte) {
	if len(b) != copyBuf {
		return
	}
	p := (*Proxy)(c)
	p.bufs.Put((*[copyBuf]byte)(b))
	<-p.bigSlots
}
