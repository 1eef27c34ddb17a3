package preview

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DialFunc connects to 127.0.0.1:port as the session's programs see it.
type DialFunc func(ctx context.Context, port int) (net.Conn, error)

// Defaults of zero-valued Options.
const (
	DefaultMaxPerSession = 8
	DefaultTicketTTL     = time.Minute
)

// Errors of Open and Enter; the mcp and web layers map them to their
// replies.
var (
	// ErrBadPort: the port is not 1–65535.
	ErrBadPort = errors.New("port out of range")
	// ErrTooMany: the session already forwards its limit of ports.
	ErrTooMany = errors.New("too many forwarded ports")
	// ErrNotForwarded: the session forwards no such port (or it ended).
	ErrNotForwarded = errors.New("port not forwarded")
	// ErrClosed: the Manager has been closed.
	ErrClosed = errors.New("previews closed")
)

// Options configures a Manager. A nil *Options means all defaults.
type Options struct {
	// Host is the address forwards listen on: the web listener's bind
	// host, so a forward is reachable wherever the monitoring page is.
	// Empty means 127.0.0.1, where (without TLS) each forward takes a
	// loopback address of its own instead (listen).
	Host string
	// MaxPerSession bounds the forwards of one session; zero means
	// DefaultMaxPerSession.
	MaxPerSession int
	// TicketTTL is how long an entry ticket may wait to be used; zero
	// means DefaultTicketTTL.
	TicketTTL time.Duration
	// TandemCredential, if set, reports whether an Authorization header's
	// value is one of tandem's own (the operator token): such a header is
	// never passed to the session's server.
	TandemCredential func(value string) bool
	// Closed, if set, is told of each forward that ends and why
	// ("session_ended", "shutdown"), for the audit.
	Closed func(f Forward, reason string)
	// Logger receives failures (warn) and forwards opening and closing
	// (debug). Nil means discard.
	Logger *slog.Logger
	// TLS, if set, makes forwards serve HTTPS with it (tandem's own
	// listener's certificate), HTTP/1.1 only; nil serves plain HTTP.
	TLS *tls.Config
}

// Forward is one forwarded port as the tools and the page show it.
type Forward struct {
	// Key is the monitoring key of the session.
	Key string
	// Port is the session's port.
	Port int
	// Addr is the forward's own listener (host:port), its origin.
	Addr string
	// Opened is when the forward was made.
	Opened time.Time
}

// Manager holds every forward of this tandem, by session. It is safe for
// concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	closed  bool
	byKey   map[string][]*forward // in the order opened
	byID    map[string]*forward
	tickets map[string]ticket
}

// ticket lets one browser into one forward, once.
type ticket struct {
	forward string // id
	next    string // the path and query to land on
	expires time.Time
}

// New returns a Manager with no forwards.
func New(opts *Options) *Manager {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.MaxPerSession <= 0 {
		o.MaxPerSession = DefaultMaxPerSession
	}
	if o.TicketTTL <= 0 {
		o.TicketTTL = DefaultTicketTTL
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: o, log: log, byKey: map[string][]*forward{}, byID: map[string]*forward{}, tickets: map[string]ticket{}}
}

// Open forwards port of the session with monitoring key: a listener of
// its own on Options.Host that proxies to dial(port). Forwarding a port
// that is forwarded already returns that forward with created false. The
// forward ends when done is closed (the session ended) or the Manager
// closes. Nothing needs to listen on the port yet: requests answer 502
// until something does.
func (m *Manager) Open(key string, port int, dial DialFunc, done <-chan struct{}) (f Forward, created bool, err error) {
	if port < 1 || port > 65535 {
		return Forward{}, false, fmt.Errorf("forward port %d: %w", port, ErrBadPort)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return Forward{}, false, fmt.Errorf("forward port %d: %w", port, ErrClosed)
	case done != nil && isClosed(done):
		return Forward{}, false, fmt.Errorf("forward port %d: %w: the session has ended", port, ErrNotForwarded)
	}
	for _, fw := range m.byKey[key] {
		if fw.info.Port == port {
			return fw.info, false, nil
		}
	}
	if len(m.byKey[key]) >= m.opts.MaxPerSession {
		return Forward{}, false, fmt.Errorf("forward port %d: %w: a session may forward %d", port, ErrTooMany, m.opts.MaxPerSession)
	}
	ln, err := m.listen()
	if err != nil {
		return Forward{}, false, fmt.Errorf("forward port %d: listen: %w", port, err)
	}
	if m.opts.TLS != nil {
		cfg := m.opts.TLS.Clone()
		// A WebSocket needs HTTP/1.1's Upgrade.
		cfg.NextProtos = []string{"http/1.1"}
		ln = tls.NewListener(ln, cfg)
	}
	fw := newForward(m, key, port, dial, ln)
	m.byKey[key] = append(m.byKey[key], fw)
	m.byID[fw.id] = fw
	go fw.serve()
	if done != nil {
		go func() {
			select {
			case <-done:
				m.closeSession(key, "session_ended")
			case <-fw.stopped:
			}
		}()
	}
	m.log.Debug("preview: port forwarded", "port", port, "addr", fw.info.Addr)
	return fw.info, true, nil
}

// listen makes a forward's listener. Browsers keep cookies by host, not
// by port, so on 127.0.0.1 without TLS each forward listens on a loopback
// address of its own (Linux routes all of 127/8 to lo): the apps' cookies,
// and their scripts' document.cookie, then stay with their own forward,
// away from other sessions' previews (another agent's code) and from
// tandem's origin. Elsewhere (another host, or TLS, whose certificate
// names one) forwards listen on Options.Host, a port each.
func (m *Manager) listen() (net.Listener, error) {
	ip := net.ParseIP(m.opts.Host)
	if m.opts.TLS == nil && ip != nil && ip.To4() != nil && ip.IsLoopback() {
		for range 8 {
			addr := m.ownLoopback()
			if ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0")); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", net.JoinHostPort(m.opts.Host, "0"))
}

// ownLoopback is a random address in 127/8 outside 127.0.0.0/16 (where
// tandem's listener and the usual services are) that no forward of this
// Manager uses. m.mu is held.
func (m *Manager) ownLoopback() string {
	for {
		var b [3]byte
		_, _ = rand.Read(b[:])
		a := netip.AddrFrom4([4]byte{127, 1 + b[0]%254, b[1], 1 + b[2]%254}).String()
		used := false
		for _, fw := range m.byID {
			if h, _, _ := net.SplitHostPort(fw.info.Addr); h == a {
				used = true
			}
		}
		if !used {
			return a
		}
	}
}

// List returns the session's forwards, in the order they were opened.
func (m *Manager) List(key string) []Forward {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Forward, 0, len(m.byKey[key]))
	for _, fw := range m.byKey[key] {
		out = append(out, fw.info)
	}
	return out
}

// Enter mints a single-use ticket into the session's forward of port and
// returns the URL that redeems it on the forward's origin: the forward's
// address, or, where the forward serves TLS or listens on every address,
// host (the name the browser used for tandem, without its port) and the
// forward's port. next is the path (and query) to land on; anything but an
// absolute path is "/". The caller has checked that the browser may look.
func (m *Manager) Enter(key string, port int, host, next string) (string, error) {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		next = "/"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var fw *forward
	for _, f := range m.byKey[key] {
		if f.info.Port == port {
			fw = f
		}
	}
	if fw == nil {
		return "", fmt.Errorf("enter port %d: %w", port, ErrNotForwarded)
	}
	now := time.Now()
	for t, tk := range m.tickets {
		if now.After(tk.expires) {
			delete(m.tickets, t)
		}
	}
	t := randomString(32)
	m.tickets[t] = ticket{forward: fw.id, next: next, expires: now.Add(m.opts.TicketTTL)}
	fhost, fport, _ := net.SplitHostPort(fw.info.Addr)
	// The listener's own address where it names one and no certificate
	// needs the name ("localhost" may resolve to ::1 first, where the
	// forward does not listen); else the name the browser used.
	if ip := net.ParseIP(fhost); host == "" || (m.opts.TLS == nil && ip != nil && !ip.IsUnspecified()) {
		host = fhost
	}
	scheme := "http://"
	if m.opts.TLS != nil {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, fport) + enterPath + "?ticket=" + t, nil
}

// redeem uses up ticket t for the forward with id: where to land, and
// whether it was good.
func (m *Manager) redeem(id, t string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	tk, ok := m.tickets[t]
	if !ok || tk.forward != id {
		return "", false
	}
	delete(m.tickets, t)
	if time.Now().After(tk.expires) {
		return "", false
	}
	return tk.next, true
}

// closeSession ends every forward of key.
func (m *Manager) closeSession(key, reason string) {
	m.mu.Lock()
	fws := m.byKey[key]
	delete(m.byKey, key)
	for _, fw := range fws {
		delete(m.byID, fw.id)
	}
	m.mu.Unlock()
	m.stop(fws, reason)
}

// stop closes fws and tells Closed of each.
func (m *Manager) stop(fws []*forward, reason string) {
	for _, fw := range fws {
		fw.close()
		m.log.Debug("preview: forward closed", "port", fw.info.Port, "reason", reason)
		if m.opts.Closed != nil {
			m.opts.Closed(fw.info, reason)
		}
	}
}

// Close ends every forward; Open fails from now on.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	var fws []*forward
	for _, key := range sortedKeys(m.byKey) {
		fws = append(fws, m.byKey[key]...)
	}
	m.byKey, m.byID = map[string][]*forward{}, map[string]*forward{}
	m.mu.Unlock()
	m.stop(fws, "shutdown")
	return nil
}

func sortedKeys(m map[string][]*forward) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// randomString is n random bytes, base64url.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// randomID is a forward's id: short, hex, cookie-name safe.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// portString is port in decimal.
func portString(port int) string { return strconv.Itoa(port) }
