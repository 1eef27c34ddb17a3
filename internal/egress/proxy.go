// Package egress is tandem's egress proxy: the only way out to the
// network for a sandboxed local session with a network allowlist. Each
// such session gets a port of its own on the one proxy of the tandem
// process: on a listener its sandbox made on the loopback of the
// session's own network namespace (Serve), or, where there is none, on
// the host's loopback (Listen), which Landlock lets the session connect to
// and no other. Its environment points HTTP_PROXY and friends at it; the
// proxy's own connections leave from tandem's network. The
// proxy speaks HTTP CONNECT and plain HTTP, judges every host and port
// against the session's allowlist, checks the address it resolves to as
// well as the name, never reaches tandem's own ports, and reports every
// decision and every finished connection.
package egress

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Decisions a connection can get.
const (
	// Allowed: an allowlist rule lets it through.
	Allowed = "allowed"
	// Refused: nothing allows it (or it aims at tandem itself).
	Refused = "refused"
	// Approved: a human let an unlisted host through.
	Approved = "approved"
	// Denied: a human refused it, or no one answered in time.
	Denied = "denied"
)

// Denial is Ask's no with its reason: the approver's own words, and who
// decided (the approval's decider: dashboard, client, upstream, timeout).
type Denial struct{ Reason, By string }

func (d *Denial) Error() string {
	if d.By == "" {
		return d.Reason
	}
	return d.Reason + " (decided by " + d.By + ")"
}

// ByAllowlist is Conn.DecidedBy for what the session's allowlist and the
// proxy's own rules decided, with no human asked.
const ByAllowlist = "allowlist"

// Conn describes one connection a session asked the proxy for: reported
// once when it is decided, and again, with its byte counts and duration,
// when it ends (Ended set). A refused connection is reported once.
type Conn struct {
	// ID tells the reports of one connection apart.
	ID string
	// Session is the name the session was opened under.
	Session string
	Host    string
	Port    uint16
	// Addr is the address the proxy connected to (or would have); empty
	// when the name did not resolve.
	Addr     string
	Decision string
	// Reason says why, in words fit for the agent: the rule that allowed
	// it, or what refused it.
	Reason string
	// Rule is the allowlist entry that allowed it, if one did.
	Rule string
	// DecidedBy says who decided: ByAllowlist, or for an asked host the
	// approval's decider (dashboard, client, upstream, timeout); empty
	// when nobody did (the program stopped waiting first).
	DecidedBy string
	// Method and Path are a request's on an inspected connection, for a
	// request refused there.
	Method, Path string
	// Inspected says the proxy terminated the connection's TLS to judge
	// its requests or add a credential.
	Inspected bool
	// Credential names the credentials the proxy adds on this connection
	// (their names, never their values).
	Credential string
	// Up and Down count the bytes sent to and received from the host.
	Up, Down int64
	Started  time.Time
	Duration time.Duration
	Ended    bool
}

// Target names host:port in a record or a refusal.
func (c Conn) Target() string { return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))) }

// Resolver turns a host name into addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configures the proxy of one tandem process.
type Options struct {
	// Resolver looks names up; nil is net.DefaultResolver.
	Resolver Resolver
	// Protected reports whether an address is one of tandem's own
	// listeners (its web port, HTTP MCP port, forward URLs): never
	// reachable through the proxy, whatever the allowlist says. The
	// proxy's own ports are always protected.
	Protected func(netip.AddrPort) bool
	// DialTimeout bounds a connect; zero is 10 s.
	DialTimeout time.Duration
	Logger      *slog.Logger
}

// Session is what the proxy needs to know of one session.
type Session struct {
	// Name names the session in records and approval requests.
	Name  string
	Allow Allowlist
	// Hosts answers for these names (lower case) without asking DNS, as
	// /etc/hosts would: e.g. an internal registry. The operator chose
	// these addresses, and no DNS answer can change them, so a mapping
	// counts as listing its addresses for that name (a loopback or
	// private one included); tandem's own ports stay out of reach.
	Hosts map[string][]netip.Addr
	// Ask, when set, is asked about a host no rule allows and answers
	// whether a human let it through; nil refuses such hosts. A *Denial
	// error says why a human, or an upstream approver, said no.
	Ask func(ctx context.Context, host string, port uint16) (bool, error)
	// Report is told of every decision and every connection's end; it
	// must not block.
	Report func(Conn)
	// Credentials are added to the requests sent to their hosts, on
	// connections the proxy inspects.
	Credentials []Credential
	// AskRequest, when set, is asked about a request on an inspected
	// connection that its allowlist entry's methods or paths refuse (why
	// says so), and answers whether a human let it through; nil refuses
	// it. A *Denial error says why a human said no.
	AskRequest func(ctx context.Context, host string, port uint16, method, path, why string) (bool, error)
}

// Proxy is the egress proxy of one tandem process. Its zero value is not
// usable; call New.
type Proxy struct {
	opts   Options
	log    *slog.Logger
	nextID atomic.Uint64

	// bufs are the tunnels' large copy buffers (copyBuf bytes each), and
	// bigSlots bounds how many are in use at once.
	bufs     sync.Pool
	bigSlots chan struct{}

	mu    sync.Mutex
	ports map[uint16]bool // the proxy's own listening ports
}

// A tunnel copies through user space rather than splice(2): on loopback on
// a two-core machine that moved a download half again as fast, and a
// large buffer faster still (BenchmarkProxyThroughput). Each direction
// starts with smallBuf bytes and takes a copyBuf buffer once a read fills
// the small one (a bulk transfer), while fewer than maxBigBufs are in use
// in the whole proxy: idle or interactive tunnels cost little, and a
// session cannot make tandem hold more than maxBigBufs*copyBuf for them.
const (
	smallBuf   = 16 << 10
	copyBuf    = 256 << 10
	maxBigBufs = 64
)

// New returns a proxy; it listens only once a session is opened.
func New(o Options) *Proxy {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{opts: o, log: log, ports: map[uint16]bool{}}
	p.bufs.New = func() any { return new([copyBuf]byte) }
	p.bigSlots = make(chan struct{}, maxBigBufs)
	return p
}

// Listener is one session's port on the proxy.
type Listener struct {
	p      *Proxy
	s      Session
	token  string
	srv    *http.Server
	tr     *http.Transport
	ca     *CA // nil: no host is inspected
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	ln       net.Listener // nil until Serve or Listen
	port     uint16
	hostPort bool // port is on the host's loopback (Listen)
	tunnel   map[net.Conn]bool
	closed   bool
	open     int // requests and tunnels being served (MaxOpen)
	asking   int // connections waiting for a human (MaxAsking)
}

// Limits a session's programs cannot go past, however many connections
// they try: a hostile program neither floods the approvers with requests
// nor holds the proxy's file descriptors.
const (
	// MaxOpen bounds one session's requests and tunnels open at once;
	// one more gets 503.
	MaxOpen = 256
	// MaxAsking bounds one session's connections waiting for a human at
	// once (ask: true); one more is refused at once.
	MaxAsking = 4
)

// take counts one more in *n, unless it is already at max; l.mu guards
// the counters (open, asking).
func (l *Listener) take(n *int, max int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *n >= max {
		return false
	}
	*n++
	return true
}

// give counts one out of *n.
func (l *Listener) give(n *int) {
	l.mu.Lock()
	*n--
	l.mu.Unlock()
}

// Open starts a port on the host's loopback for session s: Prepare, then
// Listen. Close it when the session ends.
func (p *Proxy) Open(s Session) (*Listener, error) {
	l, err := p.Prepare(s)
	if err != nil {
		return nil, err
	}
	if _, err := l.Listen(); err != nil {
		return nil, err
	}
	return l, nil
}

// Prepare makes session s's place on the proxy, with its credential, but
// no port yet: Serve starts it on a listener the session's sandbox made
// (inside its network namespace, where nothing else can reach it), Listen
// on a port of the host's loopback. Close it when the session ends.
func (p *Proxy) Prepare(s Session) (*Listener, error) {
	var tb [16]byte
	if _, err := rand.Read(tb[:]); err != nil {
		return nil, fmt.Errorf("egress proxy: token: %w", err)
	}
	s.Credentials = slices.Clone(s.Credentials)
	ca, err := prepareInspection(&s)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Listener{p: p, s: s, ca: ca, token: hex.EncodeToString(tb[:]), ctx: ctx, cancel: cancel, tunnel: map[net.Conn]bool{}}
	l.tr = &http.Transport{
		DialContext: l.dialPlain,
		// Each plain-HTTP request gets a connection of its own, judged and
		// recorded: a pooled one would carry a later request past a
		// decision (a human's, or an allowlist since reloaded).
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 5 * time.Minute,
		DisableCompression:    true,
	}
	l.srv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	return l, nil
}

// Listen serves the session on a new port of the host's loopback and
// returns it: for a sandbox that cannot make the listener itself (no
// network namespace), whose Landlock rules then allow that port only. The
// port is the proxy's own: no session reaches it through the proxy.
func (l *Listener) Listen() (uint16, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("egress proxy: listen: %w", err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	l.p.mu.Lock()
	l.p.ports[port] = true
	l.p.mu.Unlock()
	if err := l.serve(ln, port, true); err != nil {
		return 0, err
	}
	return port, nil
}

// Serve serves the session on ln, a listener made in the session's own
// network namespace and handed to tandem: only the session reaches it,
// and the proxy's dials still leave from tandem's namespace. It returns
// at once; Close stops it.
func (l *Listener) Serve(ln net.Listener) error {
	a, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		_ = ln.Close()
		return fmt.Errorf("egress proxy: serve: %v is not a TCP listener", ln.Addr())
	}
	return l.serve(ln, uint16(a.Port), false)
}

// serve starts serving ln once; host says whether its port is on the
// host's loopback (and so one of the proxy's own ports).
func (l *Listener) serve(ln net.Listener, port uint16, host bool) error {
	l.mu.Lock()
	if l.closed || l.ln != nil {
		l.mu.Unlock()
		_ = ln.Close()
		if host {
			l.p.mu.Lock()
			delete(l.p.ports, port)
			l.p.mu.Unlock()
		}
		return errors.New("egress proxy: the session's port is closed or already served")
	}
	l.ln, l.port, l.hostPort = ln, port, host
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	return nil
}

// Port is the loopback port the session's programs connect to, once
// served (0 before).
func (l *Listener) Port() uint16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.port
}

// Token is the credential the session's programs present on the port
// (Proxy-Authorization, user "tandem"): a process of another user on this
// machine, which could connect to the loopback port too, cannot use the
// session's allowlist, nor ask a human in its name.
func (l *Listener) Token() string { return l.token }

// URL is the proxy URL, credential included, for the session's
// HTTP_PROXY and friends.
func (l *Listener) URL() string {
	return "http://" + proxyUser + ":" + l.token + "@127.0.0.1:" + strconv.Itoa(int(l.Port()))
}

// proxyUser is the user name of the session's credential.
const proxyUser = "tandem"

// authorized checks the request's Proxy-Authorization in constant time.
func (l *Listener) authorized(r *http.Request) bool {
	user, pass, ok := parseProxyAuth(r.Header.Get("Proxy-Authorization"))
	return ok && subtle.ConstantTimeCompare([]byte(user+":"+pass), []byte(proxyUser+":"+l.token)) == 1
}

// parseProxyAuth reads a Basic Proxy-Authorization header.
func parseProxyAuth(h string) (user, pass string, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", "", false
	}
	b, err := base64.StdEncoding.DecodeString(h[len(prefix):])
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(b), ":")
}

// Close stops the port and ends the session's open connections.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for c := range l.tunnel {
		_ = c.Close()
	}
	port, host := l.port, l.hostPort
	l.mu.Unlock()
	l.cancel()
	err := l.srv.Close()
	l.tr.CloseIdleConnections()
	l.wg.Wait()
	if host {
		l.p.mu.Lock()
		delete(l.p.ports, port)
		l.p.mu.Unlock()
	}
	return err
}

// protected reports whether a is tandem's own.
func (p *Proxy) protected(a netip.AddrPort) bool {
	ip := a.Addr().Unmap()
	if ip.IsLoopback() || ip.IsUnspecified() {
		p.mu.Lock()
		own := p.ports[a.Port()]
		p.mu.Unlock()
		if own {
			return true
		}
	}
	return p.opts.Protected != nil && p.opts.Protected(netip.AddrPortFrom(ip, a.Port()))
}

// refusal is a connection the proxy will not make, with the words that
// say why.
type refusal struct {
	conn Conn
}

func (r *refusal) Error() string {
	return fmt.Sprintf("tandem's egress proxy refused %s: %s", r.conn.Target(), r.conn.Reason)
}

// decide judges host:port for the session and, if it may go, returns the
// addresses to dial (already checked: the dial must use them, never the
// name again). The decision is reported.
func (l *Listener) decide(ctx context.Context, host string, port uint16, tunnel bool) (Conn, []netip.Addr, error) {
	c := Conn{
		ID:      strconv.FormatUint(l.p.nextID.Add(1), 36),
		Session: l.s.Name, Host: strings.TrimSuffix(strings.ToLower(host), "."), Port: port, Started: time.Now(),
	}
	addrs, err := l.judge(ctx, &c)
	if err != nil {
		l.report(c)
		return c, nil, err
	}
	if _, creds, ok := l.inspection(c.Host, c.Port); ok && tunnel {
		c.Inspected, c.Credential = true, credentialNames(creds)
	}
	l.report(c)
	return c, addrs, nil
}

// judge fills c's decision, reason and rule. A name needs a name rule
// (or a human's yes), an address given as such an address rule (or a
// human's yes). Whatever the name, every address it resolves to is
// checked: tandem's own ports never, and a loopback, private or
// link-local address only where an address rule lists it or the
// session's Hosts maps the name to it, so a listed name that DNS resolves
// to 127.0.0.1 gets nothing. An unlisted name is not looked up before a
// human lets it through: a lookup alone can carry data out. A host whose
// addresses are known before asking (an address, a name in Hosts) and
// that no yes could let through is refused at once, never asked about.
func (l *Listener) judge(ctx context.Context, c *Conn) ([]netip.Addr, error) {
	refuse := func(why string) ([]netip.Addr, error) {
		c.Decision, c.Reason, c.DecidedBy = Refused, why, ByAllowlist
		return nil, &refusal{conn: *c}
	}
	const unlisted = "not on this session's network allowlist (network.allow in tandem.yaml)"
	if c.Port == 0 {
		return refuse("port 0")
	}
	var cands []netip.Addr
	var rule Rule
	listed, mapped := false, false
	if a, err := netip.ParseAddr(strings.Trim(c.Host, "[]")); err == nil && a.Zone() == "" {
		a = a.Unmap()
		c.Host, cands = a.String(), []netip.Addr{a}
		rule, listed = l.s.Allow.matchAddr(a, c.Port)
	} else {
		if err := checkName(c.Host); err != nil {
			return refuse("not a host name")
		}
		rule, listed = l.s.Allow.matchName(c.Host, c.Port)
		if as := l.s.Hosts[c.Host]; len(as) > 0 {
			cands, mapped = as, true
		}
	}
	decision := Allowed
	if !listed {
		if l.s.Ask == nil {
			return refuse(unlisted)
		}
		if cands != nil {
			if ok, why := l.usable(cands, c.Port, mapped); len(ok) == 0 {
				c.Addr = cands[0].String()
				return refuse(why + "; no approval could let it through, so nobody was asked")
			}
		}
		if !l.take(&l.asking, MaxAsking) {
			return refuse(fmt.Sprintf("not on the allowlist, and %d connections of this session already wait for a human; retry once they are decided", MaxAsking))
		}
		yes, err := l.s.Ask(ctx, c.Host, c.Port)
		l.give(&l.asking)
		if err != nil || !yes {
			c.deny(err)
			return nil, &refusal{conn: *c}
		}
		decision = Approved
	}
	if cands == nil {
		resolved, err := l.lookup(ctx, c.Host)
		if err != nil {
			return refuse("the name does not resolve: " + err.Error())
		}
		cands = resolved
	}
	ok, why := l.usable(cands, c.Port, mapped)
	if len(ok) == 0 {
		c.Addr = cands[0].String()
		return refuse(why)
	}
	c.Addr = ok[0].String()
	c.Decision = decision
	if decision == Approved {
		c.Reason = "a human let it through"
	} else {
		c.Rule = rule.Entry
		c.Reason = "allowed by " + strconv.Quote(c.Rule)
		c.DecidedBy = ByAllowlist
	}
	return ok, nil
}

// usable returns the addresses of cands the session may connect to on
// port, and why the last one refused was: never tandem's own ports, and a
// loopback, private or link-local address only where an address rule
// lists it or the operator's Hosts mapped the name to it (mapped).
func (l *Listener) usable(cands []netip.Addr, port uint16, mapped bool) (ok []netip.Addr, why string) {
	for _, a := range cands {
		ap := netip.AddrPortFrom(a, port)
		if l.p.protected(ap) {
			why = "it is tandem's own port (" + ap.String() + "), which sessions never reach"
			continue
		}
		if _, byAddr := l.s.Allow.matchAddr(a, port); isSpecial(a) && !byAddr && !mapped {
			why = fmt.Sprintf("it resolves to %s, a loopback, private or link-local address that no address rule lists", a)
			continue
		}
		ok = append(ok, a)
	}
	return ok, why
}

// lookup resolves host through Options.Hosts, then the resolver.
func (l *Listener) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if as, ok := l.s.Hosts[host]; ok && len(as) > 0 {
		return as, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.p.opts.DialTimeout)
	defer cancel()
	as, err := l.p.opts.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
			return nil, errors.New("no such host")
		}
		return nil, err
	}
	if len(as) == 0 {
		return nil, errors.New("no addresses")
	}
	for i := range as {
		as[i] = as[i].Unmap()
	}
	return as, nil
}

// dial connects to the first of addrs that answers.
func (l *Listener) dial(ctx context.Context, addrs []netip.Addr, port uint16) (net.Conn, error) {
	d := net.Dialer{Timeout: l.p.opts.DialTimeout}
	var err error
	for _, a := range addrs {
		var c net.Conn
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, port).String())
		if err == nil {
			return c, nil
		}
	}
	return nil, err
}

func (l *Listener) report(c Conn) {
	if l.s.Report != nil {
		l.s.Report(c)
	}
}

// ServeHTTP handles one request a session's program sent to the proxy.
func (l *Listener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !l.authorized(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="tandem"`)
		http.Error(w, "tandem's egress proxy: this port serves one session's programs, which present its credential (the user and password in their HTTP_PROXY)", http.StatusProxyAuthRequired)
		return
	}
	r.Header.Del("Proxy-Authorization") // never passed on
	if !l.take(&l.open, MaxOpen) {
		http.Error(w, fmt.Sprintf("tandem's egress proxy: this session already has %d connections open; close some and retry", MaxOpen), http.StatusServiceUnavailable)
		return
	}
	defer l.give(&l.open)
	switch {
	case r.Method == http.MethodConnect:
		l.connect(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		l.forward(w, r)
	case r.URL.IsAbs():
		http.Error(w, "tandem's egress proxy forwards http:// requests; for https, use CONNECT (set HTTPS_PROXY)", http.StatusBadRequest)
	default:
		http.Error(w, "this is tandem's egress proxy: send requests through it (HTTP_PROXY, HTTPS_PROXY), not to it", http.StatusBadRequest)
	}
}

// splitTarget reads host and port from a CONNECT target or URL host.
func splitTarget(hostport, defPort string) (string, uint16, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		if defPort == "" {
			return "", 0, fmt.Errorf("%q has no port", hostport)
		}
		host, port = strings.Trim(hostport, "[]"), defPort
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("%q is not a port", port)
	}
	return host, uint16(n), nil
}

// refuse answers a refused request with the reason as plain text.
func refuse(w http.ResponseWriter, err error) {
	var r *refusal
	if errors.As(err, &r) {
		w.Header().Set("X-Tandem-Refused", r.conn.Decision)
		http.Error(w, r.Error(), http.StatusForbidden)
		return
	}
	http.Error(w, "tandem's egress proxy: "+err.Error(), http.StatusBadGateway)
}

// connect handles CONNECT: judge, dial, then copy both ways.
func (l *Listener) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitTarget(r.Host, "")
	if err != nil {
		http.Error(w, "tandem's egress proxy: CONNECT needs host:port: "+err.Error(), http.StatusBadRequest)
		return
	}
	c, addrs, err := l.decide(r.Context(), host, port, true)
	if err != nil {
		refuse(w, err)
		return
	}
	if c.Inspected {
		l.connectInspected(w, c, addrs)
		return
	}
	up, err := l.dial(r.Context(), addrs, port)
	if err != nil {
		l.ended(c, 0, 0)
		http.Error(w, fmt.Sprintf("tandem's egress proxy: %s: %v", c.Target(), err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "tandem's egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !l.track(down, up) {
		_ = down.Close()
		_ = up.Close()
		return
	}
	defer l.untrack(down, up)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		l.ended(c, 0, 0)
		return
	}
	var sent int64
	if n := buf.Reader.Buffered(); n > 0 {
		// Bytes the client sent right behind its CONNECT.
		p, _ := buf.Reader.Peek(n)
		m, err := up.Write(p)
		sent += int64(m)
		if err != nil {
			l.ended(c, sent, 0)
			return
		}
	}
	upN, downN := l.p.pipe(down, up)
	l.ended(c, sent+upN, downN)
}

// connectInspected answers an allowed CONNECT to an inspected host: the
// tunnel ends at the proxy (inspect), which judges and forwards each
// request.
func (l *Listener) connectInspected(w http.ResponseWriter, c Conn, addrs []netip.Addr) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		l.ended(c, 0, 0)
		http.Error(w, "tandem's egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, buf, err := hj.Hijack()
	if err != nil {
		l.ended(c, 0, 0)
		return
	}
	if !l.track(down) {
		_ = down.Close()
		l.ended(c, 0, 0)
		return
	}
	defer l.untrack(down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		l.ended(c, 0, 0)
		return
	}
	rule, creds, _ := l.inspection(c.Host, c.Port)
	upN, downN := l.inspect(c, &bufConn{Conn: down, r: buf.Reader}, addrs, rule, creds)
	l.ended(c, upN, downN)
}

// pipe copies both ways until both directions end; each direction's end
// is passed on as a half close where the connection supports it.
func (p *Proxy) pipe(down, up net.Conn) (upN, downN int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		downN = p.copy(down, up)
		closeWrite(down)
	}()
	upN = p.copy(up, down)
	closeWrite(up)
	wg.Wait()
	return upN, downN
}

// copy copies src to dst until either ends, never through splice(2), and
// returns the bytes written (see copyBuf).
func (p *Proxy) copy(dst io.Writer, src io.Reader) (n int64) {
	buf := make([]byte, smallBuf)
	var big *[copyBuf]byte
	defer func() {
		if big != nil {
			p.bufs.Put(big)
			<-p.bigSlots
		}
	}()
	for {
		k, rerr := src.Read(buf)
		if k > 0 {
			w, werr := dst.Write(buf[:k])
			n += int64(w)
			if werr != nil {
				return n
			}
			if big == nil && k == len(buf) {
				select {
				case p.bigSlots <- struct{}{}:
					big = p.bufs.Get().(*[copyBuf]byte)
					buf = big[:]
				default: // the proxy's budget is in use: go on small
				}
			}
		}
		if rerr != nil {
			return n
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// track files a tunnel's two ends so Close can end them.
func (l *Listener) track(cs ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	for _, c := range cs {
		l.tunnel[c] = true
	}
	return true
}

func (l *Listener) untrack(cs ...net.Conn) {
	l.mu.Lock()
	for _, c := range cs {
		delete(l.tunnel, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// ended reports a connection's end.
func (l *Listener) ended(c Conn, up, down int64) {
	c.Up, c.Down, c.Ended, c.Duration = up, down, true, time.Since(c.Started)
	l.report(c)
}

// forward handles a plain-HTTP request in absolute form: judged when its
// connection is dialled (dialPlain), then passed on.
func (l *Listener) forward(w http.ResponseWriter, r *http.Request) {
	if host, port, err := splitTarget(r.URL.Host, "80"); err == nil {
		// Plain HTTP is seen whole: a host's method and path rules hold
		// here too (a credential is never added to it).
		host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
		if rule, _, _ := l.inspection(host, port); rule.Judged() {
			if why := rule.judgeRequest(r.Method, r.URL.Path); why != "" {
				l.refuseRequest(Conn{Session: l.s.Name, Host: host, Port: port}, r.Method, r.URL.Path, why)
				w.Header().Set("X-Tandem-Refused", Refused)
				http.Error(w, fmt.Sprintf("tandem's egress proxy refused %s %s%s: %s", r.Method, host, r.URL.Path, why), http.StatusForbidden)
				return
			}
		}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The transport dials on a context that outlives the request
			// (so that another request may use the connection); the dial's
			// ask still ends when this request's client leaves.
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), clientKey{}, r.Context()))
			pr.Out.URL = r.URL
			pr.Out.Host = r.Host
			pr.Out.RequestURI = ""
		},
		Transport:     l.tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(l.p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			refuse(w, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// clientKey carries, in a plain-HTTP dial's context, the context of the
// client's request: a client that leaves ends the dial's wait for a human.
type clientKey struct{}

// dialPlain is the plain-HTTP transport's dialer: each new connection is
// judged and reported like a tunnel.
func (l *Listener) dialPlain(ctx context.Context, _, addr string) (net.Conn, error) {
	host, port, err := splitTarget(addr, "80")
	if err != nil {
		return nil, err
	}
	if client, ok := ctx.Value(clientKey{}).(context.Context); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(client, cancel)()
	}
	c, addrs, err := l.decide(ctx, host, port, false)
	if err != nil {
		return nil, err
	}
	up, err := l.dial(ctx, addrs, port)
	if err != nil {
		l.ended(c, 0, 0)
		return nil, err
	}
	return &countedConn{Conn: up, l: l, c: c}, nil
}

// countedConn counts a plain-HTTP upstream connection's bytes and reports
// its end.
type countedConn struct {
	net.Conn
	l        *Listener
	c        Conn
	up, down atomic.Int64
	once     sync.Once
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.down.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.up.Add(int64(n))
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.ended(c.c, c.up.Load(), c.down.Load()) })
	return err
}

// deny records that no human let c through: a human's denial names who
// decided and their reason; another error (a timeout, the program gave up)
// says why nobody did.
func (c *Conn) deny(err error) {
	c.Decision, c.Reason = Denied, "a human did not let it through"
	var d *Denial
	switch {
	case errors.As(err, &d):
		c.DecidedBy = d.By
		if d.Reason != "" {
			c.Reason = "denied: " + d.Error()
		}
	case err != nil:
		c.Reason = "no human let it through: " + err.Error()
	}
}
