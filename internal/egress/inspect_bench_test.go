package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchTLS is a TLS host (example.com) that serves /small (one byte) and
// /big (size bytes), with a tunnelled session and an inspected one (a
// credential) on the proxy, and a client for each.
type benchTLS struct {
	srv               *httptest.Server
	tunnel, inspected *Listener
	roots             *x509.CertPool
}

func newBenchTLS(b *testing.B, size int64) *benchTLS {
	b.Helper()
	chunk := make([]byte, 1<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			_, _ = w.Write([]byte{'x'})
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; {
			n := min(left, int64(len(chunk)))
			if _, err := w.Write(chunk[:n]); err != nil {
				return
			}
			left -= n
		}
	}))
	b.Cleanup(srv.Close)
	_, port, _ := splitTarget(srv.Listener.Addr().String(), "")
	a, err := ParseAllow([]string{"example.com:" + strconv.Itoa(int(port))})
	if err != nil {
		b.Fatal(err)
	}
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	hosts := map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}}
	p := New(Options{Resolver: fakeDNS{}})
	t, err := p.Open(Session{Name: "tunnel", Allow: a, Hosts: hosts})
	if err != nil {
		b.Fatal(err)
	}
	i, err := p.Open(Session{Name: "inspected", Allow: a, Hosts: hosts,
		Credentials: []Credential{{Name: "api", Host: "example.com", Header: "Authorization", Value: "Bearer x", RootCAs: roots}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = t.Close(); _ = i.Close() })
	return &benchTLS{srv: srv, tunnel: t, inspected: i, roots: roots}
}

// client fetches through l (nil: directly), a new connection per request
// unless keep.
func (bt *benchTLS) client(l *Listener, keep bool) *http.Client {
	pool := bt.roots.Clone()
	tr := &http.Transport{DisableKeepAlives: !keep, DisableCompression: true}
	if l == nil {
		addr := bt.srv.Listener.Addr().String()
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	} else {
		u, _ := url.Parse(l.URL())
		tr.Proxy = http.ProxyURL(u)
		if l.CA() != nil {
			pool = x509.NewCertPool()
			pool.AddCert(l.CA().Certificate())
		}
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "example.com"}
	return &http.Client{Transport: tr}
}

func (bt *benchTLS) url(path string) string {
	_, port, _ := splitTarget(bt.srv.Listener.Addr().String(), "")
	return "https://example.com:" + strconv.Itoa(int(port)) + path
}

// BenchmarkProxyInspectedConnect: a new HTTPS connection and a one-byte
// GET, through an opaque tunnel and through an inspected one (the proxy
// ends TLS with a cached certificate, judges, adds the credential and
// opens its own verified TLS upstream); the medians of 100 each and what
// inspection adds (the target: at most 3 ms).
func BenchmarkProxyInspectedConnect(b *testing.B) {
	bt := newBenchTLS(b, 1)
	one := func(c *http.Client) float64 {
		start := time.Now()
		resp, err := c.Get(bt.url("/small"))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return float64(time.Since(start).Microseconds())
	}
	tc, ic := bt.client(bt.tunnel, false), bt.client(bt.inspected, false)
	var tunnelled, inspected []float64
	for b.Loop() {
		for range 100 {
			tunnelled = append(tunnelled, one(tc))
			inspected = append(inspected, one(ic))
		}
	}
	t, i := median(tunnelled), median(inspected)
	b.ReportMetric(t, "tunnel-µs")
	b.ReportMetric(i, "inspected-µs")
	b.ReportMetric(i-t, "added-µs")
}

// BenchmarkProxyInspectedThroughput: an HTTPS download (1 GiB, or
// TANDEM_BENCH_INSPECT_BYTES) directly and through an inspected
// connection, which decrypts and encrypts it once more each way; the
// median of three each, interleaved, and the ratio (the target: 0.6 or
// better). The server, the proxy and the client share the machine's
// cores, so the ratio also depends on what else runs: cpu-ratio is the
// process's CPU time per byte direct over inspected (medians), the
// ratio a machine with no core to spare gets whatever else runs.
func BenchmarkProxyInspectedThroughput(b *testing.B) {
	size := int64(1 << 30)
	if s, err := strconv.ParseInt(os.Getenv("TANDEM_BENCH_INSPECT_BYTES"), 10, 64); err == nil && s > 0 {
		size = s
	}
	bt := newBenchTLS(b, size)
	get := func(c *http.Client, cpu *[]float64) float64 {
		start, cpu0 := time.Now(), cpuTime()
		resp, err := c.Get(bt.url("/big"))
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		*cpu = append(*cpu, (cpuTime()-cpu0).Seconds()/float64(size))
		return float64(size) / time.Since(start).Seconds() / 1e6
	}
	dc, ic := bt.client(nil, true), bt.client(bt.inspected, true)
	var direct, inspected, directCPU, inspectedCPU []float64
	for b.Loop() {
		for range 3 {
			direct = append(direct, get(dc, &directCPU))
			inspected = append(inspected, get(ic, &inspectedCPU))
		}
	}
	d, i := median(direct), median(inspected)
	b.ReportMetric(d, "direct-MB/s")
	b.ReportMetric(i, "inspected-MB/s")
	b.ReportMetric(i/d, "inspected/direct")
	b.ReportMetric(median(directCPU)/median(inspectedCPU), "cpu-ratio")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
