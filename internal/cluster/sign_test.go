package cluster

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSigner(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	a, err := NewSigner(secret, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSigner([]byte("short"), "x"); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
	other, _ := NewSigner([]byte(strings.Repeat("t", 32)), "node-b")
	now := time.Now()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	signed := func(method, url string, body []byte, s *Signer) *http.Request {
		r, _ := http.NewRequest(method, url, nil)
		s.Sign(r, body)
		// The receiver sees the path only, as a server does.
		in, _ := http.NewRequest(method, r.URL.RequestURI(), nil)
		in.Header = r.Header
		return in
	}
	for _, tc := range []struct {
		name    string
		req     *http.Request
		body    []byte
		skew    time.Duration
		wantErr bool
	}{
		{"good", signed("POST", "http://a:1/mcp", body, a), body, 0, false},
		{"good, no body", signed("GET", "http://a:1/s/key/ws", nil, a), nil, 0, false},
		{"other secret", signed("POST", "http://a:1/mcp", body, other), body, 0, true},
		{"body changed", signed("POST", "http://a:1/mcp", body, a), []byte(`{"id":2}`), 0, true},
		{"path changed", func() *http.Request {
			r := signed("GET", "http://a:1/internal/v1/sessions/s1/monitor-key", nil, a)
			r.URL.Path = "/internal/v1/sessions/s2/monitor-key"
			return r
		}(), nil, 0, true},
		{"method changed", func() *http.Request {
			r := signed("GET", "http://a:1/mcp", body, a)
			r.Method = "POST"
			return r
		}(), body, 0, true},
		{"sender changed", func() *http.Request {
			r := signed("POST", "http://a:1/mcp", body, a)
			r.Header.Set(headerNode, "node-c")
			return r
		}(), body, 0, true},
		{"stale", signed("POST", "http://a:1/mcp", body, a), body, time.Minute, true},
		{"future", signed("POST", "http://a:1/mcp", body, a), body, -time.Minute, true},
		{"unsigned", func() *http.Request { r, _ := http.NewRequest("POST", "/mcp", nil); return r }(), body, 0, true},
		{"garbage time", func() *http.Request {
			r := signed("POST", "http://a:1/mcp", body, a)
			r.Header.Set(headerTime, "soon")
			return r
		}(), body, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := NewSigner(secret, "node-b")
			v.now = func() time.Time { return now.Add(tc.skew) }
			from, err := v.Verify(tc.req, tc.body)
			switch {
			case tc.wantErr && !errors.Is(err, ErrBadSignature):
				t.Fatalf("verified (from %q, err %v); want ErrBadSignature", from, err)
			case !tc.wantErr && (err != nil || from != "node-a"):
				t.Fatalf("from %q, err %v; want node-a", from, err)
			}
		})
	}
}

func TestMonitorKey(t *testing.T) {
	for path, want := range map[string]string{
		"/s/abc": "abc", "/s/abc/ws": "abc", "/s/abc/cast": "abc", "/s/": "", "/mcp": "", "/api/s/abc": "",
	} {
		if got, ok := monitorKey(path); got != want || ok != (want != "") {
			t.Errorf("monitorKey(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}
