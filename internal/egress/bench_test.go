package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// source serves size bytes to every connection, then closes it.
func source(b *testing.B, size int64) (net.Listener, uint16) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	chunk := make([]byte, 1<<20)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for left := size; left > 0; {
					n := min(left, int64(len(chunk)))
					if _, err := c.Write(chunk[:n]); err != nil {
						return
					}
					left -= n
				}
			}()
		}
	}()
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}

// openBench is a proxy port whose allowlist lists the source.
func openBench(b *testing.B, port uint16) *Listener {
	b.Helper()
	a, err := ParseAllow([]string{"127.0.0.1:" + strconv.Itoa(int(port))})
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(Options{}).Open(Session{Name: "bench", Allow: a})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// dialVia connects to target directly (proxy "") or through a CONNECT
// tunnel of the proxy, presenting l's credential.
func dialVia(l *Listener, proxy, target string) (net.Conn, io.Reader, error) {
	if proxy == "" {
		c, err := net.Dial("tcp", target)
		return c, c, err
	}
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth(l))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, nil, fmt.Errorf("CONNECT: %v %v", resp, err)
	}
	if br.Buffered() > 0 {
		return c, io.MultiReader(io.LimitReader(br, int64(br.Buffered())), c), nil
	}
	return c, c, nil
}

func median(ds []float64) float64 {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// relay is the floor of any relay on this machine: a bare copy from each
// connection to target, with no protocol and no judging, as the proxy
// copies (a 64 KiB buffer, no splice).
func relay(b *testing.B, target string) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				buf := make([]byte, copyBuf)
				_, _ = io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{up}, buf)
			}()
		}
	}()
	return ln.Addr().String()
}

// BenchmarkProxyThroughput: a 1 GiB download on loopback, directly,
// through a bare relay, and through a CONNECT tunnel of the proxy, in
// turn; the median of seven of each, and the ratios (the target: proxy at least
// 80% of direct). On a machine of two cores the relay's hop is a third
// party sharing them: proxy/relay is what tandem itself costs.
func BenchmarkProxyThroughput(b *testing.B) {
	const size = 1 << 30
	_, port := source(b, size)
	l := openBench(b, port)
	target := "127.0.0.1:" + strconv.Itoa(int(port))
	proxy := "127.0.0.1:" + strconv.Itoa(int(l.Port()))
	bare := relay(b, target)
	get := func(via string) float64 {
		if via == bare {
			c, err := net.Dial("tcp", bare)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if n, err := io.Copy(io.Discard, c); err != nil || n != size {
				b.Fatalf("read %d of %d: %v", n, size, err)
			}
			return float64(size) / time.Since(start).Seconds() / 1e6
		}
		c, r, err := dialVia(l, via, target)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		n, err := io.Copy(io.Discard, r)
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
		return float64(size) / time.Since(start).Seconds() / 1e6
	}
	var direct, bared, proxied []float64
	for b.Loop() {
		for range 7 {
			direct = append(direct, get(""))
			bared = append(bared, get(bare))
			proxied = append(proxied, get(proxy))
		}
	}
	d, r, p := median(direct), median(bared), median(proxied)
	b.ReportMetric(d, "direct-MB/s")
	b.ReportMetric(r, "relay-MB/s")
	b.ReportMetric(p, "proxy-MB/s")
	b.ReportMetric(p/d, "proxy/direct")
	b.ReportMetric(p/r, "proxy/relay")
}

// BenchmarkProxyConnect: a new connection and its first byte, directly and
// through the proxy (CONNECT, judged against the allowlist, dialled, 200);
// the medians of 300 each and what the proxy adds (the target: at most
// 1 ms).
func BenchmarkProxyConnect(b *testing.B) {
	_, port := source(b, 1)
	l := openBench(b, port)
	target := "127.0.0.1:" + strconv.Itoa(int(port))
	proxy := "127.0.0.1:" + strconv.Itoa(int(l.Port()))
	one := func(via string) float64 {
		start := time.Now()
		c, r, err := dialVia(l, via, target)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		var buf [1]byte
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(start).Microseconds())
	}
	var direct, proxied []float64
	for b.Loop() {
		for range 300 {
			direct = append(direct, one(""))
			proxied = append(proxied, one(proxy))
		}
	}
	d, p := median(direct), median(proxied)
	b.ReportMetric(d, "direct-µs")
	b.ReportMetric(p, "proxy-µs")
	b.ReportMetric(p-d, "added-µs")
}
