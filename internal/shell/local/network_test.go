package local

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeProxy stands in for the session's place on the egress proxy: it
// answers every connection with "proxied" and records how the backend
// started it.
type fakeProxy struct {
	t      *testing.T
	mu     sync.Mutex
	served string // "namespace" (Serve) or "host" (Listen)
	port   int
}

func (p *fakeProxy) Token() string { return "t0ken" }

func (p *fakeProxy) Serve(ln net.Listener) error {
	p.start("namespace", ln)
	return nil
}

func (p *fakeProxy) Listen() (uint16, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	p.start("host", ln)
	return uint16(ln.Addr().(*net.TCPAddr).Port), nil
}

func (p *fakeProxy) start(how string, ln net.Listener) {
	p.mu.Lock()
	p.served, p.port = how, ln.Addr().(*net.TCPAddr).Port
	p.mu.Unlock()
	p.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "proxied\n")
			c.Close()
		}
	}()
}

// TestDialProxy: with a proxy, a shell in its own network namespace gets
// the proxy's listener made inside it (handed to tandem, out of the
// host's reach), and under the fallback one on the host's loopback; either
// way HTTP_PROXY leads there, with the session's credential, and the shell
// reaches it.
func TestDialProxy(t *testing.T) {
	for _, tc := range []struct {
		name          string
		noNamespace   bool
		want          string
		hostReachable bool
	}{
		{"namespace", false, "namespace", false},
		{"fallback", true, "host", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := sandboxed(t)
			o.NoNetNamespace = tc.noNamespace
			p := &fakeProxy{t: t}
			l := bash()
			l.Proxy = p
			tm := startTermLaunch(t, o, l)
			tm.send(`echo "proxy=$HTTP_PROXY"; exec 3<>/dev/tcp/127.0.0.1/${HTTP_PROXY##*:} && head -n1 <&3; exec 3<&-`)
			m := tm.expect(`proxy=http://tandem:t0ken@127\.0\.0\.1:(\d+)\r\n`)
			tm.expect(`proxied`)
			p.mu.Lock()
			served, port := p.served, p.port
			p.mu.Unlock()
			if served != tc.want || strconv.Itoa(port) != m[1] {
				t.Fatalf("served %q on %d, HTTP_PROXY names %s; want %s", served, port, m[1], tc.want)
			}
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.hostReachable {
				t.Errorf("the proxy's port on the host's loopback: reachable %v, want %v", err == nil, tc.hostReachable)
			}
		})
	}
}
