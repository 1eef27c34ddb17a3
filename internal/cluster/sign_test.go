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
		s.Sign(r, body, "node-b")
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
		{"nonce changed", func() *http.Request {
			r := signed("POST", "http://a:1/mcp", body, a)
			r.Header.Set(headerNonce, strings.Repeat("0", 32))
			return r
		}(), body, 0, true},
		{"no nonce", func() *http.Request {
			r := signed("POST", "http://a:1/mcp", body, a)
			r.Header.Del(headerNonce)
			return r
		}(), body, 0, true},
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

// TestSignerReplay: a request verifies once; sent again, even within the
// allowed skew, it is refused. Another request still verifies.
func TestSignerReplay(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	a, _ := NewSigner(secret, "node-a")
	b, _ := NewSigner(secret, "node-b")
	body := []byte(`{"id":1}`)
	r, _ := http.NewRequest("POST", "http://b:1/mcp", nil)
	a.Sign(r, body, "node-b")
	in, _ := http.NewRequest("POST", "/mcp", nil)
	in.Header = r.Header
	if _, err := b.Verify(in, body); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	if _, err := b.Verify(in, body); !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), "replay") {
		t.Fatalf("replayed request: err = %v; want a refused replay", err)
	}
	r2, _ := http.NewRequest("POST", "http://b:1/mcp", nil)
	a.Sign(r2, body, "node-b")
	in2, _ := http.NewRequest("POST", "/mcp", nil)
	in2.Header = r2.Header
	if _, err := b.Verify(in2, body); err != nil {
		t.Fatalf("a new request with the same body: %v", err)
	}
	// Old nonces are forgotten once no request bearing them is accepted.
	for i := 0; i < 3000; i++ {
		b.now = func() time.Time { return time.Now().Add(time.Duration(i) * time.Second) }
		r, _ := http.NewRequest("GET", "http://b:1/x", nil)
		a.now = b.now
		a.Sign(r, nil, "node-b")
		in, _ := http.NewRequest("GET", "/x", nil)
		in.Header = r.Header
		if _, err := b.Verify(in, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.seen); n > 2048 {
		t.Fatalf("%d nonces kept; old ones are never forgotten", n)
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

// TestSignedForOneNode: a signed request names the node it is for. Captured
// on its way to node A and replayed to node B, it is refused; replayed to
// A, it is refused too (its nonce was served); and a request claiming to
// be for B after the fact does not verify.
func TestSignedForOneNode(t *testing.T) {
	secret := []byte(strings.Repeat("s", 32))
	c, _ := NewSigner(secret, "node-c")
	a, _ := NewSigner(secret, "node-a")
	b, _ := NewSigner(secret, "node-b")
	body := []byte(`{"approve":true}`)
	out, _ := http.NewRequest("POST", "http://a:1/internal/v1/approvals/x/decision", nil)
	c.Sign(out, body, "node-a")
	captured := func() *http.Request {
		in, _ := http.NewRequest("POST", "/internal/v1/approvals/x/decision", nil)
		in.Header = out.Header.Clone()
		return in
	}
	if _, err := b.Verify(captured(), body); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("replayed to node B: err = %v; want refused", err)
	}
	retargeted := captured()
	retargeted.Header.Set(headerTo, "node-b")
	if _, err := b.Verify(retargeted, body); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("readdressed to node B: err = %v; want refused", err)
	}
	if from, err := a.Verify(captured(), body); err != nil || from != "node-c" {
		t.Fatalf("delivered to node A: from %q, err %v", from, err)
	}
	if _, err := a.Verify(captured(), body); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("replayed to node A: err = %v; want refused", err)
	}
}
