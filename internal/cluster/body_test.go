package cluster

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingBody counts what the server reads of a request body.
type countingBody struct {
	r io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func (c countingBody) Close() error { return c.r.Close() }

// counted serves h over real HTTP and counts the body bytes read of every
// request it gets.
func counted(t *testing.T, h http.Handler) (url string, read *atomic.Int64) {
	read = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, read}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, read
}

// TestUnauthenticatedBodyNotRead: a request that carries neither a valid
// bearer token nor a node's signature is refused before its body is read,
// on /mcp and on the internal endpoints; an authenticated one is served
// whole; a body past the bound is refused with 413.
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	signer, err := NewSigner([]byte(strings.Repeat("k", 32)), "b")
	if err != nil {
		t.Fatal(err)
	}
	n, o := routeNode(time.Now())
	n.Signer = signer
	var got atomic.Int64
	endpoint := func(w http.ResponseWriter, r *http.Request) {
		if _, ok := o.Identify(r.Context(), r); !ok && r.URL.Path == "/mcp" {
			http.Error(w, "bearer refused", http.StatusUnauthorized) // as the MCP endpoint: nothing read
			return
		}
		b, _ := io.ReadAll(r.Body)
		got.Store(int64(len(b)))
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}
	mcpURL, mcpRead := counted(t, n.MCP(http.HandlerFunc(endpoint), o))
	internalURL, internalRead := counted(t, n.Internal(http.HandlerFunc(endpoint)))

	big := bytes.Repeat([]byte("x"), 8<<20)
	for _, tc := range []struct {
		name, url, auth string
		sig             bool
		body            []byte
		want            int
		wantRead        int64 // at most
	}{
		{"mcp, no token", mcpURL + "/mcp", "", false, big, http.StatusUnauthorized, 0},
		{"mcp, a wrong token", mcpURL + "/mcp", "Bearer nope", false, big, http.StatusUnauthorized, 0},
		{"mcp, a forged signature", mcpURL + "/mcp", "Bearer one", true, big, http.StatusForbidden, 0},
		{"internal, unsigned", internalURL + "/internal/v1/x", "", false, big, http.StatusForbidden, 0},
		{"internal, a forged signature", internalURL + "/internal/v1/x", "", true, big, http.StatusForbidden, 0},
		{"mcp, authenticated, past 16 MiB", mcpURL + "/mcp", "Bearer one", false, bytes.Repeat([]byte("x"), maxBody+1), http.StatusRequestEntityTooLarge, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mcpRead.Store(0)
			internalRead.Store(0)
			req, _ := http.NewRequest(http.MethodPost, tc.url, bytes.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.sig {
				req.Header.Set(headerNode, "a")
				req.Header.Set(headerTime, "1")
				req.Header.Set(headerNonce, strings.Repeat("0", 32))
				req.Header.Set(headerSignature, strings.Repeat("0", 64))
			}
			resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if err == nil && resp.StatusCode != tc.want {
				t.Fatalf("status %d; want %d", resp.StatusCode, tc.want)
			}
			if read := mcpRead.Load() + internalRead.Load(); read > tc.wantRead {
				t.Fatalf("the node read %d bytes of an unauthenticated body; want none", read)
			}
		})
	}

	// Authenticated: a caller's large call and a node's signed request are
	// read whole and reach the endpoint.
	body := append([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","pad":"`), bytes.Repeat([]byte("y"), 3<<20)...)
	body = append(body, `"}`...)
	req, _ := http.NewRequest(http.MethodPost, mcpURL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer one")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK || got.Load() != int64(len(body)) {
		t.Fatalf("an authenticated %d-byte call: %v %v; the endpoint got %d bytes", len(body), resp, err, got.Load())
	}
	resp.Body.Close()

	// A node's signed request is served with the body it signed, and
	// refused with another in its place.
	peer, _ := NewSigner([]byte(strings.Repeat("k", 32)), "a")
	for _, tc := range []struct {
		name, url string
		sent      []byte
		want      int
	}{
		{"mcp, signed", mcpURL + "/mcp", body, http.StatusOK},
		{"mcp, body swapped", mcpURL + "/mcp", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`), http.StatusForbidden},
		{"internal, signed", internalURL + "/internal/v1/x", body, http.StatusOK},
		{"internal, body swapped", internalURL + "/internal/v1/x", []byte(`{}`), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got.Store(-1)
			req, _ := http.NewRequest(http.MethodPost, tc.url, bytes.NewReader(tc.sent))
			req.Header.Set("Authorization", "Bearer one") // a forwarded call carries its caller's token
			peer.Sign(req, body, "b")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d; want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusOK && got.Load() != int64(len(body)) {
				t.Fatalf("the endpoint got %d bytes; want the %d signed", got.Load(), len(body))
			}
			if tc.want != http.StatusOK && got.Load() != -1 {
				t.Fatal("the endpoint ran for a swapped body")
			}
		})
	}
}

// TestInFlightBudget: authenticated bodies held at once are bounded in
// total: past the budget a request is refused (503) rather than buffered,
// and once the held ones are done the next is served.
func TestInFlightBudget(t *testing.T) {
	n, o := routeNode(time.Now())
	n.Signer, _ = NewSigner([]byte(strings.Repeat("k", 32)), "b")
	release := make(chan struct{})
	var held sync.WaitGroup
	h := n.MCP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Done()
		<-release
		_, _ = io.WriteString(w, "{}")
	}), o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	post := func(size int) (int, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", bytes.NewReader(bytes.Repeat([]byte(" "), size)))
		req.Header.Set("Authorization", "Bearer one")
		resp, err := (&http.Client{Transport: &http.Transport{}, Timeout: 20 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	k := maxInFlight / maxBody
	held.Add(k)
	done := make(chan int, k)
	for range k {
		go func() { st, _ := post(maxBody - readChunk); done <- st }()
	}
	held.Wait() // k full bodies are held by the endpoint
	if st, err := post(1 << 20); err != nil || st != http.StatusServiceUnavailable {
		t.Fatalf("a body past the in-flight budget: %d %v; want 503", st, err)
	}
	close(release)
	for range k {
		if st := <-done; st != http.StatusOK {
			t.Fatalf("a held request answered %d", st)
		}
	}
	held.Add(1)
	if st, err := post(1 << 20); err != nil || st != http.StatusOK {
		t.Fatalf("after the held ones: %d %v; want 200", st, err)
	}
}
