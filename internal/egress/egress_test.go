package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

func TestParseAllow(t *testing.T) {
	tests := []struct {
		entry string
		rule  Rule
		err   string
	}{
		{"proxy.golang.org", Rule{Name: "proxy.golang.org"}, ""},
		{"PyPI.org:443", Rule{Name: "pypi.org", Port: 443}, ""},
		{"*.pythonhosted.org", Rule{Name: "*.pythonhosted.org"}, ""},
		{"example.com.", Rule{Name: "example.com"}, ""},
		{"10.0.0.5", Rule{Net: netip.MustParsePrefix("10.0.0.5/32")}, ""},
		{"127.0.0.1:8080", Rule{Net: netip.MustParsePrefix("127.0.0.1/32"), Port: 8080}, ""},
		{"10.1.0.0/16", Rule{Net: netip.MustParsePrefix("10.1.0.0/16")}, ""},
		{"10.1.2.3/16:5432", Rule{Net: netip.MustParsePrefix("10.1.0.0/16"), Port: 5432}, ""},
		{"[fd00::1]:443", Rule{Net: netip.MustParsePrefix("fd00::1/128"), Port: 443}, ""},
		{"fd00::/8", Rule{Net: netip.MustParsePrefix("fd00::/8")}, ""},
		{"", Rule{}, "empty"},
		{"a.*.com", Rule{}, "'*' may only start"},
		{"host:0", Rule{}, "port"},
		{"host:99999", Rule{}, "port"},
		{"host:http", Rule{}, "port"},
		{"fd00::1:443x", Rule{}, "brackets"},
		{"[fd00::1", Rule{}, "without ']'"},
		{"exa mple.com", Rule{}, "not a host name"},
		{"preset:cobol", Rule{}, "no such preset"},
	}
	for _, tc := range tests {
		a, err := ParseAllow([]string{tc.entry})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadEntry) {
				t.Errorf("%q: error %v, want one saying %q", tc.entry, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.entry, err)
			continue
		}
		got := a.Rules()[0]
		tc.rule.Entry = tc.entry
		if !reflect.DeepEqual(got, tc.rule) {
			t.Errorf("%q: %+v, want %+v", tc.entry, got, tc.rule)
		}
	}
}

func TestPresets(t *testing.T) {
	for name, hosts := range Presets() {
		a, err := ParseAllow([]string{"preset:" + name})
		if err != nil {
			t.Fatalf("preset %s: %v", name, err)
		}
		if len(a.Rules()) != len(hosts) {
			t.Errorf("preset %s: %d rules for %d hosts", name, len(a.Rules()), len(hosts))
		}
		for _, r := range a.Rules() {
			if r.Entry != "preset:"+name || r.Name == "" || r.Port != 443 {
				t.Errorf("preset %s: rule %+v", name, r)
			}
		}
	}
}

func TestMatch(t *testing.T) {
	a, err := ParseAllow([]string{"*.pythonhosted.org", "pypi.org:443", "go.dev", "10.0.0.0/8:5432"})
	if err != nil {
		t.Fatal(err)
	}
	names := []struct {
		host string
		port uint16
		ok   bool
	}{
		{"files.pythonhosted.org", 443, true},
		{"a.b.pythonhosted.org", 80, true},
		{"pythonhosted.org", 443, false}, // a wildcard covers names under it only
		{"evilpythonhosted.org", 443, false},
		{"pypi.org", 443, true},
		{"PYPI.ORG.", 443, true},
		{"pypi.org", 80, false},
		{"go.dev", 22, true},
		{"go.dev.evil.com", 443, false},
	}
	for _, tc := range names {
		if _, ok := a.matchName(tc.host, tc.port); ok != tc.ok {
			t.Errorf("%s:%d allowed %v, want %v", tc.host, tc.port, ok, tc.ok)
		}
	}
	if _, ok := a.matchAddr(netip.MustParseAddr("10.9.9.9"), 5432); !ok {
		t.Error("10.9.9.9:5432 not allowed")
	}
	if _, ok := a.matchAddr(netip.MustParseAddr("::ffff:10.9.9.9"), 5432); !ok {
		t.Error("a v4-mapped 10.9.9.9:5432 not allowed")
	}
	if _, ok := a.matchAddr(netip.MustParseAddr("10.9.9.9"), 22); ok {
		t.Error("10.9.9.9:22 allowed")
	}
}

func TestSpecial(t *testing.T) {
	for _, s := range []string{"127.0.0.1", "127.8.9.1", "::1", "10.1.1.1", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"100.64.0.1", "0.0.0.0", "::", "fe80::1", "fd00::1", "224.0.0.1", "255.255.255.255", "::ffff:127.0.0.1", "64:ff9b::7f00:1"} {
		if !isSpecial(netip.MustParseAddr(s)) {
			t.Errorf("%s is not special", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "151.101.1.69"} {
		if isSpecial(netip.MustParseAddr(s)) {
			t.Errorf("%s is special", s)
		}
	}
}

// FuzzParseAllow: no entry panics, and every entry that parses gives
// rules that name what they came from.
func FuzzParseAllow(f *testing.F) {
	for _, s := range []string{"pypi.org:443", "*.x.org", "[::1]:80", "10.0.0.0/8:22", "preset:go", "a:b:c", "[", "*."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		a, err := ParseAllow([]string{e})
		if err != nil {
			return
		}
		for _, r := range a.Rules() {
			if r.Entry == "" || (r.Name == "") == !r.Net.IsValid() {
				t.Fatalf("%q: rule %+v", e, r)
			}
		}
	})
}

// fixture is a proxy with one session port, and the reports it made.
type fixture struct {
	p   *Proxy
	l   *Listener
	mu  sync.Mutex
	got []Conn
}

// fakeDNS answers lookups from a table, as a DNS server the operator does
// not control would.
type fakeDNS map[string][]netip.Addr

func (d fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if as, ok := d[host]; ok {
		return as, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// newFixture opens a session with allow and ask on a fresh proxy. hosts
// maps names to addresses: a name ending in ".dns" is answered by the
// proxy's resolver (DNS, which the operator does not control), any other
// by the session's Hosts (the operator's own mapping).
func newFixture(t *testing.T, allow []string, hosts map[string]string, ask func(context.Context, string, uint16) (bool, error), protected ...netip.AddrPort) *fixture {
	t.Helper()
	a, err := ParseAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string][]netip.Addr{}
	dns := fakeDNS{}
	for n, addr := range hosts {
		if strings.HasSuffix(n, ".dns") {
			dns[n] = []netip.Addr{netip.MustParseAddr(addr)}
			continue
		}
		h[n] = []netip.Addr{netip.MustParseAddr(addr)}
	}
	f := &fixture{}
	f.p = New(Options{Resolver: dns, Protected: func(ap netip.AddrPort) bool {
		for _, p := range protected {
			if p == ap {
				return true
			}
		}
		return false
	}})
	f.l, err = f.p.Open(Session{Name: "dev", Allow: a, Hosts: h, Ask: ask, Report: func(c Conn) {
		f.mu.Lock()
		f.got = append(f.got, c)
		f.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.l.Close() })
	return f
}

// client is an HTTP client whose every request goes through the proxy.
func (f *fixture) client(srv *httptest.Server) *http.Client {
	u, _ := url.Parse(f.l.URL())
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}
	if srv != nil && srv.TLS != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (f *fixture) reports() []Conn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Conn(nil), f.got...)
}

func portOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProxyJudges(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secure hello") }))
	t.Cleanup(tlsSrv.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain hello %s via %s", r.URL.Path, r.Header.Get("Proxy-Authorization"))
	}))
	t.Cleanup(plain.Close)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tandem's web port") }))
	t.Cleanup(own.Close)
	tp, pp, op := portOf(t, tlsSrv), portOf(t, plain), portOf(t, own)
	hosts := map[string]string{"good.test": "127.0.0.1", "plain.test": "127.0.0.1", "rebind.dns": "127.0.0.1", "own.test": "127.0.0.1", "unlisted.test": "127.0.0.1"}
	f := newFixture(t, []string{"good.test", "plain.test:" + pp, "rebind.dns", "own.test", "127.0.0.1:" + tp, "127.0.0.1:" + pp, "127.0.0.1:" + op},
		hosts, nil, netip.MustParseAddrPort("127.0.0.1:"+op))

	tests := []struct {
		name, url string
		srv       *httptest.Server
		body      string // "" when refused
		reason    string
	}{
		{"https to an allowed name", "https://good.test:" + tp + "/", tlsSrv, "secure hello", ""},
		{"plain http to an allowed name and port", "http://plain.test:" + pp + "/x", plain, "plain hello /x via ", ""},
		{"a name on no rule", "https://unlisted.test:" + tp + "/", tlsSrv, "", "not on this session's network allowlist"},
		{"an allowed name on another port", "http://plain.test:" + tp + "/", nil, "", "not on this session's network allowlist"},
		{"an allowed name that DNS resolves to loopback on an unlisted port", "http://rebind.dns:1/", nil, "", "loopback, private or link-local"},
		{"tandem's own port, though listed", "http://own.test:" + op + "/", nil, "", "tandem's own port"},
		{"an address that no rule lists", "http://127.0.0.2:" + pp + "/", nil, "", "not on this session's network allowlist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.client(tc.srv).Get(tc.url)
			if tc.body != "" {
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != tc.body {
					t.Fatalf("body %q, want %q", b, tc.body)
				}
				return
			}
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), tc.reason) {
					t.Fatalf("status %d %q, want 403 saying %q", resp.StatusCode, b, tc.reason)
				}
				return
			}
			// A refused CONNECT: Go's client says so without the body.
			if !strings.Contains(err.Error(), "Forbidden") {
				t.Fatalf("error %v, want a refusal", err)
			}
		})
	}
	// A connection's end is reported when the proxy sees the close, on its
	// own time: wait for both.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		n := 0
		for _, c := range f.reports() {
			if c.Ended {
				n++
			}
		}
		if n >= 2 {
			break
		}
	}
	var refused, ended int
	for _, c := range f.reports() {
		switch {
		case c.Decision == Refused:
			refused++
			if c.Reason == "" || c.Session != "dev" {
				t.Errorf("refusal %+v has no reason or session", c)
			}
		case c.Ended:
			ended++
		}
	}
	if refused != 5 {
		t.Errorf("%d refusals reported, want 5: %+v", refused, f.reports())
	}
	if ended != 2 {
		t.Errorf("%d ended connections reported, want 2: %+v", ended, f.reports())
	}
	for _, c := range f.reports() {
		if c.Ended && c.Host == "good.test" && (c.Down < 100 || c.Up < 100 || c.Addr != "127.0.0.1" || c.Rule != "good.test") {
			t.Errorf("the TLS connection's record: %+v", c)
		}
	}
}

// TestProxyOwnPorts: with all of loopback listed, tandem's own ports and
// the proxy's (this session's and another's) stay out of reach.
func TestProxyOwnPorts(t *testing.T) {
	own := netip.MustParseAddrPort("127.0.0.1:4001")
	f := newFixture(t, []string{"127.0.0.0/8", "[::1]"}, nil, nil, own)
	other, err := f.p.Open(Session{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	for _, target := range []string{"127.0.0.1:4001", fmt.Sprintf("127.0.0.1:%d", f.l.Port()), fmt.Sprintf("127.0.0.1:%d", other.Port()), fmt.Sprintf("[::1]:%d", other.Port()), fmt.Sprintf("[::ffff:127.0.0.1]:%d", other.Port())} {
		c, err := net.Dial("tcp", f.l.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", target, target, auth(f.l))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(io.LimitReader(c, 4096))
		c.Close()
		if !strings.Contains(string(b), " 403 ") || !strings.Contains(string(b), "tandem's own port") {
			t.Errorf("CONNECT %s: %q", target, b)
		}
	}
}

// TestProxyAsks: with Ask, an unlisted host waits for the answer, before
// its name is even looked up; one a human let through is still refused if
// DNS resolves it to a loopback address no address rule lists.
func TestProxyAsks(t *testing.T) {
	var asked []string
	var mu sync.Mutex
	answer := true
	f := newFixture(t, []string{"127.0.0.1"}, map[string]string{"public.test": "203.0.113.9", "loop.dns": "127.0.0.2"},
		func(ctx context.Context, host string, port uint16) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, fmt.Sprintf("%s:%d", host, port))
			return answer, nil
		})
	conn := func(target string) string {
		c, err := net.Dial("tcp", f.l.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth(f.l))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	answer = false
	if got := conn("public.test:443"); !strings.Contains(got, "403") {
		t.Errorf("a denied host: %q", got)
	}
	mu.Lock()
	answer = true
	mu.Unlock()
	if got := conn("loop.dns:9"); !strings.Contains(got, "403") {
		t.Errorf("an approved name on an unlisted loopback address: %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(asked, " ") != "public.test:443 loop.dns:9" {
		t.Errorf("asked about %v", asked)
	}
	var denied int
	for _, c := range f.reports() {
		if c.Decision == Denied {
			denied++
		}
	}
	if denied != 1 {
		t.Errorf("%d denials reported", denied)
	}
}

// echoListener serves TCP on loopback, echoing what each connection sends.
func echoListener(t *testing.T) net.Listener {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return echo
}

// TestProxyLimits: a session's program cannot make more than MaxAsking
// connections wait for a human, nor hold more than MaxOpen open at once;
// the one past a limit is refused at once, and a place freed is usable
// again.
func TestProxyLimits(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	echo := echoListener(t)
	f := newFixture(t, []string{echo.Addr().String()}, map[string]string{"ask.test": "203.0.113.9"},
		func(ctx context.Context, host string, port uint16) (bool, error) {
			waiting.Add(1)
			defer waiting.Add(-1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return false, nil
		})
	// open sends CONNECT target on a connection of its own.
	open := func(target string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", f.l.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth(f.l))
		return c
	}
	status := func(c net.Conn) string {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}

	var asks []net.Conn
	for i := 0; i < MaxAsking; i++ {
		c := open("ask.test:443")
		asks = append(asks, c)
	}
	for deadline := time.Now().Add(10 * time.Second); waiting.Load() < MaxAsking; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d asks wait, want %d", waiting.Load(), MaxAsking)
		}
	}
	c := open("ask.test:8443")
	if got := status(c); !strings.Contains(got, "403") {
		t.Errorf("one ask past the limit: %q", got)
	}
	if r := f.reports(); len(r) == 0 || !strings.Contains(r[len(r)-1].Reason, "already wait for a human") {
		t.Errorf("the refusal's reason: %+v", r)
	}
	close(release)
	for _, c := range asks {
		if got := status(c); !strings.Contains(got, "403") {
			t.Errorf("a denied ask: %q", got)
		}
	}

	var tunnels []net.Conn
	for i := 0; i < MaxOpen; i++ {
		c := open(echo.Addr().String())
		if got := status(c); !strings.Contains(got, "200") {
			t.Fatalf("tunnel %d: %q", i, got)
		}
		tunnels = append(tunnels, c)
	}
	c = open(echo.Addr().String())
	if got := status(c); !strings.Contains(got, "503") {
		t.Errorf("one tunnel past the limit: %q", got)
	}
	tunnels[0].Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c := open(echo.Addr().String())
		got := status(c)
		if strings.Contains(got, "200") {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a freed place is not usable again: %q", got)
		}
	}
}

// TestProxyNotAProxyRequest: a request sent to the proxy itself gets a
// plain explanation, and bad CONNECT targets a clear 400.
func TestProxyNotAProxyRequest(t *testing.T) {
	f := newFixture(t, []string{"example.com"}, nil, nil)
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", f.l.Port()), nil)
	req.Header.Set("Proxy-Authorization", strings.TrimSuffix(strings.TrimPrefix(auth(f.l), "Proxy-Authorization: "), "\r\n"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "egress proxy") {
		t.Errorf("%d %q", resp.StatusCode, b)
	}
	for _, target := range []string{"nohost", "host:0", "host:x", "bad name!:443"} {
		c, err := net.Dial("tcp", f.l.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth(f.l))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, " 400 ") && !strings.Contains(line, " 403 ") {
			t.Errorf("CONNECT %s: %q", target, line)
		}
	}
}

// TestProxyCloseEndsTunnels: closing a session's port ends its open
// tunnels and frees the port.
func TestProxyCloseEndsTunnels(t *testing.T) {
	echo := echoListener(t)
	f := newFixture(t, []string{echo.Addr().String()}, nil, nil)
	c, err := net.Dial("tcp", f.l.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n%s\r\nping", echo.Addr(), auth(f.l))
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	if err := f.l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadByte(); err == nil {
		t.Error("the tunnel is still open after Close")
	}
	if f.p.protected(netip.MustParseAddrPort(fmt.Sprintf("127.0.0.1:%d", f.l.Port()))) {
		t.Error("a closed port is still the proxy's")
	}
}

// TestPresetsInREADME: the network page of the reference lists every
// preset with exactly its hosts.
func TestPresetsInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../docs/network.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, hosts := range Presets() {
		line := "- `preset:" + name + "`: " + strings.Join(hosts, ", ") + "\n"
		if !strings.Contains(string(readme), line) {
			t.Errorf("docs/network.md does not list %q", strings.TrimSpace(line))
		}
	}
}

// auth is the Proxy-Authorization header line of l's credential.
func auth(l *Listener) string {
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("tandem:"+l.Token())) + "\r\n"
}

// TestProxyNeedsTheCredential: a client without the session's credential
// (another user's process can reach the loopback port too) is refused
// before anything is judged, asked or recorded.
func TestProxyNeedsTheCredential(t *testing.T) {
	asked := false
	f := newFixture(t, []string{"127.0.0.1"}, nil, func(context.Context, string, uint16) (bool, error) { asked = true; return true, nil })
	for name, header := range map[string]string{
		"none":           "",
		"wrong password": "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("tandem:"+strings.Repeat("0", 32))) + "\r\n",
		"wrong user":     "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("root:"+f.l.Token())) + "\r\n",
		"not basic":      "Proxy-Authorization: Bearer " + f.l.Token() + "\r\n",
		"bad base64":     "Proxy-Authorization: Basic !!!\r\n",
	} {
		c, err := net.Dial("tcp", f.l.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT unlisted.test:443 HTTP/1.1\r\nHost: unlisted.test:443\r\n%sConnection: close\r\n\r\n", header)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if !strings.Contains(string(b), " 407 ") || !strings.Contains(string(b), "Proxy-Authenticate") {
			t.Errorf("%s: %q", name, b)
		}
	}
	if asked || len(f.reports()) != 0 {
		t.Errorf("a client without the credential was judged: asked %v, reports %v", asked, f.reports())
	}
	if !strings.Contains(f.l.URL(), "tandem:"+f.l.Token()+"@127.0.0.1:") {
		t.Errorf("the proxy URL carries no credential: %s", f.l.URL())
	}
}

// TestProxyCopy: a tunnel direction copies every byte, in order, whether
// it moves to a large buffer (a bulk transfer) or stays small because the
// proxy's budget of large buffers is in use; the large buffer goes back
// when the copy ends.
func TestProxyCopy(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i * 7 / 13)
	}
	for _, tc := range []struct {
		full bool
		src  func() io.Reader
	}{
		{false, func() io.Reader { return bytes.NewReader(data) }},
		{false, func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }},
		{true, func() io.Reader { return bytes.NewReader(data) }},
	} {
		full := tc.full
		p := New(Options{})
		if full {
			for range maxBigBufs {
				p.bigSlots <- struct{}{}
			}
		}
		var got bytes.Buffer
		n := p.copy(&got, tc.src())
		if n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("budget full %v: copied %d of %d bytes, equal %v", full, n, len(data), bytes.Equal(got.Bytes(), data))
		}
		if want := map[bool]int{false: 0, true: maxBigBufs}[full]; len(p.bigSlots) != want {
			t.Errorf("budget full %v: %d large buffers in use after the copy, want %d", full, len(p.bigSlots), want)
		}
	}
	// A large buffer is taken only for a bulk transfer.
	p := New(Options{})
	r, w := io.Pipe()
	done := make(chan int64)
	go func() { done <- p.copy(io.Discard, r) }()
	for range 10 {
		if _, err := w.Write([]byte("a short line\n")); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.bigSlots) != 0 {
		t.Errorf("short reads took a large buffer")
	}
	// The write after the full one returns once the copy reads again,
	// which is after it took the large buffer.
	for _, b := range [][]byte{make([]byte, smallBuf), []byte("x")} {
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.bigSlots) != 1 {
		t.Errorf("a full read did not take a large buffer: %d in use", len(p.bigSlots))
	}
	_ = w.Close()
	if n := <-done; n != 10*13+smallBuf+1 {
		t.Errorf("copied %d bytes", n)
	}
	if len(p.bigSlots) != 0 {
		t.Errorf("the large buffer was not given back")
	}
}

// TestProxyServesAHandedListener: a session's place made with Prepare is
// served on a listener handed to it (the one its sandbox made in the
// session's network namespace; here one on loopback): the session's
// programs get through it as through Open's port, and Close ends it. Such
// a port is not one of the proxy's own: it is not on the host.
func TestProxyServesAHandedListener(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "handed") }))
	t.Cleanup(srv.Close)
	a, err := ParseAllow([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{})
	l, err := p.Prepare(Session{Name: "ns", Allow: a})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if l.Port() != 0 {
		t.Fatalf("a prepared place has port %d before it is served", l.Port())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Serve(ln); err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	if l.Port() != port || p.protected(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)) {
		t.Errorf("port %d (want %d), counted among the proxy's own: %v", l.Port(), port, p.protected(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)))
	}
	again, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := l.Serve(again); err == nil {
		t.Error("a second listener was served too")
	}
	u, _ := url.Parse(l.URL())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "handed" {
		t.Fatalf("through the handed listener: %s %q", resp.Status, b)
	}
	_ = l.Close()
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the handed listener still accepts after Close")
	}
}
