package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCALeaf(t *testing.T) {
	ca, err := NewCA("dev", []string{"api.test", "*.forge.test"}, []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	tests := []struct {
		host string
		ok   bool
	}{
		{"api.test", true},
		{"git.forge.test", true},
		{"10.0.0.5", true},
		{"other.test", false}, // outside the CA's name constraints
		{"10.0.0.6", false},
	}
	for _, tc := range tests {
		leaf, err := ca.Leaf(tc.host)
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		again, _ := ca.Leaf(tc.host)
		if again != leaf {
			t.Errorf("%s: the leaf is not kept", tc.host)
		}
		c, err := x509.ParseCertificate(leaf.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(x509.VerifyOptions{DNSName: tc.host, Roots: pool})
		if (err == nil) != tc.ok {
			t.Errorf("%s: verify error %v, want ok=%v", tc.host, err, tc.ok)
		}
	}
	if pub := ca.Certificate().PublicKeyAlgorithm; pub != x509.ECDSA {
		t.Errorf("CA key %v, want ECDSA", pub)
	}
	if strings.Contains(string(ca.TrustBundle()), "PRIVATE") || !strings.HasSuffix(string(ca.TrustBundle()), string(ca.CertPEM())) {
		t.Error("the trust bundle must end with the CA's certificate and hold no key")
	}
}

func TestJudgeRequest(t *testing.T) {
	a, err := ParseEntries([]Entry{{Host: "api.test", Methods: []string{"GET", "HEAD"}, Paths: []string{"/repos/acme/*", "/user"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := a.Rules()[0]
	tests := []struct {
		method, path, why string
	}{
		{"GET", "/repos/acme/x", ""},
		{"HEAD", "/repos/acme/", ""},
		{"GET", "/user", ""},
		{"GET", "/user/keys", "not under"},
		{"POST", "/repos/acme/x", "method POST"},
		{"GET", "/repos/other/x", "not under"},
		{"GET", "/repos/acme/../other/x", "not clean"},
		{"GET", "/repos/acme//x", "not clean"},
		{"GET", "/repos/acme", "not under"},
	}
	for _, tc := range tests {
		why := r.judgeRequest(tc.method, tc.path)
		if (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, why, tc.why)
		}
	}
	for _, bad := range []Entry{
		{Host: "api.test", Methods: []string{"get"}},
		{Host: "api.test", Paths: []string{"repos"}},
		{Host: "api.test", Paths: []string{"/a/*/b"}},
		{Host: "api.test", Paths: []string{"/a/../b"}},
		{Host: "preset:go", Methods: []string{"GET"}},
	} {
		if _, err := ParseEntries([]Entry{bad}); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// apiFixture is a session with an inspected API host (example.com, the
// name httptest's certificate carries) that needs a bearer token.
type apiFixture struct {
	*fixture
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path auth"
}

const testSecret = "s3cret-token-of-the-operator"

func newAPIFixture(t *testing.T, replace bool) *apiFixture {
	t.Helper()
	return newAPIFixtureProto(t, replace, false)
}

// newAPIFixtureProto is newAPIFixture, with a host that speaks HTTP/2
// only (it offers h2 alone and answers 505 to HTTP/1.1) when h2.
func newAPIFixtureProto(t *testing.T, replace, h2 bool) *apiFixture {
	t.Helper()
	af := &apiFixture{}
	af.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h2 && r.ProtoMajor != 2 {
			http.Error(w, "this host speaks HTTP/2 only", http.StatusHTTPVersionNotSupported)
			return
		}
		af.mu.Lock()
		af.seen = append(af.seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		af.mu.Unlock()
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	af.srv.EnableHTTP2 = h2
	af.srv.StartTLS()
	t.Cleanup(af.srv.Close)
	port := portOf(t, af.srv)
	a, err := ParseEntries([]Entry{{Host: "example.com:" + port, Methods: []string{"GET"}, Paths: []string{"/repos/acme/*"}}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{}
	f.p = New(Options{Resolver: fakeDNS{}})
	f.l, err = f.p.Open(Session{Name: "dev", Allow: a, Hosts: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}},
		Credentials: []Credential{{Name: "api", Host: "example.com", Header: "Authorization", Value: "Bearer " + testSecret, Replace: replace,
			RootCAs: af.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}},
		Report: func(c Conn) {
			f.mu.Lock()
			f.got = append(f.got, c)
			f.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.l.Close() })
	af.fixture = f
	return af
}

// sessionClient trusts the session's CA only, as a program in the session
// does through its bundle.
func (af *apiFixture) sessionClient(serverName string) *http.Client {
	return af.sessionClientProto(serverName, false)
}

// sessionClientProto is sessionClient, offering HTTP/2 when h2.
func (af *apiFixture) sessionClientProto(serverName string, h2 bool) *http.Client {
	u, _ := url.Parse(af.l.URL())
	pool := x509.NewCertPool()
	pool.AddCert(af.l.CA().Certificate())
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}, ForceAttemptHTTP2: h2}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func (af *apiFixture) seenRequests() []string {
	af.mu.Lock()
	defer af.mu.Unlock()
	return append([]string(nil), af.seen...)
}

// TestInspectedRequests: the program speaks HTTP/1.1 or HTTP/2 to the
// proxy, and the host HTTP/1.1 or HTTP/2 only (the proxy speaks what the
// host offers by ALPN); the credential, the rules and the fronting check
// hold the same for each.
func TestInspectedRequests(t *testing.T) {
	name := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}
	for _, h2 := range []bool{false, true} {
		for _, up := range []bool{false, true} {
			t.Run(name[h2]+" to an "+name[up]+" host", func(t *testing.T) { testInspectedRequests(t, h2, up) })
		}
	}
}

func testInspectedRequests(t *testing.T, h2, upH2 bool) {
	af := newAPIFixtureProto(t, false, upH2)
	base := "https://example.com:" + portOf(t, af.srv)
	tests := []struct {
		name, method, path string
		header             http.Header
		host               string
		status             int
		reason             string
		seen               string // what the server saw; "" nothing
	}{
		{"allowed GET gets the bearer", "GET", "/repos/acme/x", nil, "", 200, "", "GET /repos/acme/x Bearer " + testSecret},
		{"POST is refused", "POST", "/repos/acme/x", nil, "", 403, "method POST", ""},
		{"another path is refused", "GET", "/repos/other/x", nil, "", 403, "not under", ""},
		{"a dot-dot path is refused", "GET", "/repos/acme/%2e%2e/other", nil, "", 403, "not clean", ""},
		{"its own Authorization is refused", "GET", "/repos/acme/x", http.Header{"Authorization": {"Bearer mine"}}, "", 403, "brings its own Authorization", ""},
		{"fronting through the Host header is refused", "GET", "/repos/acme/x", nil, "other.test", 403, "domain fronting", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(af.seenRequests())
			req, _ := http.NewRequest(tc.method, base+tc.path, nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := af.sessionClientProto("example.com", h2).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
				t.Errorf("the proxy answered over HTTP/%d, want %d", resp.ProtoMajor, want)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.reason) {
				t.Fatalf("%d %q, want %d saying %q", resp.StatusCode, b, tc.status, tc.reason)
			}
			if strings.Contains(string(b), testSecret) {
				t.Fatalf("the reply %q holds the secret", b)
			}
			seen := af.seenRequests()[before:]
			if tc.seen == "" && len(seen) > 0 || tc.seen != "" && (len(seen) != 1 || seen[0] != tc.seen) {
				t.Fatalf("server saw %q, want %q", seen, tc.seen)
			}
		})
	}
	// A refused request is reported with its method and path; the
	// tunnel names the credential, never its value.
	var refusedPost, named bool
	for _, c := range af.reports() {
		if c.Decision == Refused && c.Method == "POST" && c.Path == "/repos/acme/x" && c.Inspected {
			refusedPost = true
		}
		if c.Decision == Allowed && c.Credential == "api" && c.Inspected {
			named = true
		}
		if strings.Contains(fmt.Sprintf("%+v", c), testSecret) {
			t.Errorf("a report holds the secret: %+v", c)
		}
	}
	if !refusedPost || !named {
		t.Errorf("reports %+v: want a refused POST with method and path, and a tunnel naming credential api", af.reports())
	}
}

// TestInspectedKeepsContentLength: a response the host sends with a
// Content-Length reaches the program with it, not re-encoded as chunks,
// whatever each side speaks.
func TestInspectedKeepsContentLength(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, up := range []bool{false, true} {
			af := newAPIFixtureProto(t, false, up)
			resp, err := af.sessionClientProto("example.com", h2).Get("https://example.com:" + portOf(t, af.srv) + "/repos/acme/x")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := int64(len("hello /repos/acme/x")); resp.StatusCode != 200 || resp.ContentLength != want || len(resp.TransferEncoding) > 0 {
				t.Errorf("program h2 %v, host h2 %v: %d %q, length %d %v; want 200 with length %d, not chunked",
					h2, up, resp.StatusCode, b, resp.ContentLength, resp.TransferEncoding, want)
			}
		}
	}
}

func TestInspectedFrontingBySNI(t *testing.T) {
	af := newAPIFixture(t, false)
	_, err := af.sessionClient("other.test").Get("https://example.com:" + portOf(t, af.srv) + "/repos/acme/x")
	if err == nil {
		t.Fatal("a TLS name other than the tunnel's host was let through")
	}
	if seen := af.seenRequests(); len(seen) > 0 {
		t.Fatalf("the server saw %q", seen)
	}
	found := false
	for _, c := range af.reports() {
		found = found || c.Decision == Refused && strings.Contains(c.Reason, "domain fronting")
	}
	if !found {
		t.Errorf("no fronting refusal in %+v", af.reports())
	}
}

func TestInspectedReplace(t *testing.T) {
	af := newAPIFixture(t, true)
	req, _ := http.NewRequest("GET", "https://example.com:"+portOf(t, af.srv)+"/repos/acme/x", nil)
	req.Header.Set("Authorization", "Bearer mine")
	resp, err := af.sessionClient("example.com").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen := af.seenRequests(); resp.StatusCode != 200 || len(seen) != 1 || !strings.HasSuffix(seen[0], "Bearer "+testSecret) {
		t.Fatalf("%d, server saw %q: want the credential to replace the program's header", resp.StatusCode, seen)
	}
}

// TestInspectedSmuggling sends, on one inspected connection, a request
// whose Content-Length and Transfer-Encoding disagree, with a second
// request hidden in what one of them counts as its body, then a
// pipelined third: every request the proxy parses is judged, so the
// server never sees the refused path.
func TestInspectedSmuggling(t *testing.T) {
	af := newAPIFixture(t, false)
	host := "example.com:" + portOf(t, af.srv)
	raw, err := net.Dial("tcp", "127.0.0.1:"+fmt.Sprint(af.l.Port()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("tandem:" + af.l.Token()))
	fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", host, host, auth)
	br := bufio.NewReader(raw)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(af.l.CA().Certificate())
	tc := tls.Client(raw, &tls.Config{ServerName: "example.com", RootCAs: pool})
	hidden := "GET /repos/other/x HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	fmt.Fprintf(tc, "GET /repos/acme/a HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s", host, 5+len(hidden), hidden)
	fmt.Fprintf(tc, "GET /repos/acme/b HTTP/1.1\r\nHost: %s\r\n\r\n", host)
	_ = tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(tc)
	if !strings.Contains(string(got), "refused GET example.com/repos/other/x") {
		t.Errorf("replies %q: want the hidden request judged and refused", got)
	}
	for _, s := range af.seenRequests() {
		if strings.Contains(s, "/repos/other") {
			t.Fatalf("a smuggled request reached the server: %q", af.seenRequests())
		}
	}
}

// TestInspectedUpstreamUnverified: a host whose certificate the proxy
// cannot verify (no caFile, and a test CA the system does not trust) is
// refused with the reason, and the request never reaches it.
func TestInspectedUpstreamUnverified(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	a, err := ParseEntries([]Entry{{Host: "example.com:" + portOf(t, srv)}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []Conn
	p := New(Options{Resolver: fakeDNS{}})
	l, err := p.Open(Session{Name: "dev", Allow: a, Hosts: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}},
		Credentials: []Credential{{Name: "api", Host: "example.com", Header: "Authorization", Value: "Bearer x"}},
		Report:      func(c Conn) { mu.Lock(); got = append(got, c); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	af := &apiFixture{fixture: &fixture{p: p, l: l}}
	resp, err := af.sessionClient("example.com").Get("https://example.com:" + portOf(t, srv) + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "could not be verified") || hits.Load() != 0 {
		t.Fatalf("%d %q, %d requests reached the host: want 502 saying the host could not be verified, and none", resp.StatusCode, b, hits.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range got {
		if c.Decision == Refused && strings.Contains(c.Reason, "could not be verified") {
			return
		}
	}
	t.Errorf("no refusal reported in %+v", got)
}

// TestInspectedStreams: on one inspected connection (keep-alive), a
// chunked upload reaches the host whole and a streamed response reaches
// the program chunk by chunk, before the host ends it; to a host of
// HTTP/1.1 and to one of HTTP/2, over one upstream connection.
func TestInspectedStreams(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1 host", true: "HTTP/2 host"}[h2], func(t *testing.T) { testInspectedStreams(t, h2) })
	}
}

func testInspectedStreams(t *testing.T, h2 bool) {
	release, releaseBig := make(chan struct{}), make(chan struct{})
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
			http.Error(w, "the proxy spoke "+r.Proto, http.StatusHTTPVersionNotSupported)
			return
		}
		switch r.URL.Path {
		case "/upload":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %d bytes, streamed=%v", len(b), r.ContentLength < 0)
		case "/stream":
			fmt.Fprint(w, "first\n")
			w.(http.Flusher).Flush()
			<-release
			fmt.Fprint(w, "second\n")
		case "/big":
			_, _ = w.Write(bytes.Repeat([]byte{'z'}, 2<<20))
		case "/bigstream":
			// Many records at once, then a wait: the proxy takes in
			// what is there and must not wait for more.
			_, _ = w.Write(bytes.Repeat([]byte{'y'}, 300<<10))
			w.(http.Flusher).Flush()
			<-releaseBig
			fmt.Fprint(w, "end")
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.EnableHTTP2 = h2
	srv.StartTLS()
	t.Cleanup(srv.Close)
	a, err := ParseEntries([]Entry{{Host: "example.com:" + portOf(t, srv), Methods: []string{"GET", "POST"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := New(Options{Resolver: fakeDNS{}})
	l, err := p.Open(Session{Name: "dev", Allow: a, Hosts: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}},
		Credentials: []Credential{{Name: "api", Host: "example.com", Header: "Authorization", Value: "Bearer x",
			RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	c := (&apiFixture{fixture: &fixture{p: p, l: l}}).sessionClient("example.com")
	base := "https://example.com:" + portOf(t, srv)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 64; i++ {
			_, _ = pw.Write(bytes.Repeat([]byte{'x'}, 1024))
		}
		_ = pw.Close()
	}()
	resp, err := c.Post(base+"/upload", "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "got 65536 bytes, streamed=true" {
		t.Fatalf("upload: %q", b)
	}
	resp, err = c.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("the first chunk did not come before the host ended: %q %v", line, err)
	}
	close(release)
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
	resp.Body.Close()
	resp, err = c.Get(base + "/bigstream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	big := make([]byte, 300<<10)
	if _, err := io.ReadFull(resp.Body, big); err != nil || !bytes.Equal(big, bytes.Repeat([]byte{'y'}, 300<<10)) {
		t.Fatalf("the first 300 KiB did not come before the host ended: %v", err)
	}
	close(releaseBig)
	if rest, _ := io.ReadAll(resp.Body); string(rest) != "end" {
		t.Fatalf("rest %q", rest)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d upstream connections for three requests of one kept-alive connection, want 1", n)
	}

	// A program speaking HTTP/2 with a small window: each write of the
	// response waits for its window updates, which come only once the
	// program has the data before them.
	af := &apiFixture{fixture: &fixture{p: p, l: l}}
	hc := af.sessionClientProto("example.com", true)
	hc.Transport.(*http.Transport).HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerConnection: 64 << 10, MaxReceiveBufferPerStream: 16 << 10}
	resp, err = hc.Get(base + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 2<<20 || resp.ProtoMajor != 2 {
		t.Fatalf("2 MiB over HTTP/2 with a 16 KiB window: %d bytes, %s, %v", len(b), resp.Proto, err)
	}
	resp.Body.Close()

	// Connections kept alive and idle hold none of the proxy's large
	// buffers: a session's many idle connections cannot take them all.
	deadline := time.Now().Add(5 * time.Second)
	for len(p.bigSlots) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d large buffers held by idle connections", len(p.bigSlots))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
