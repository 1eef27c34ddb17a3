package web_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/tandem-sh/tandem/internal/web"
)

func wsURL(base, key string) string {
	return "ws" + strings.TrimPrefix(web.MonitorURL(base, key), "http") + "/ws"
}

func dial(t *testing.T, ctx context.Context, base string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(ctx, wsURL(base, testKey), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {base}},
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// readUntil reads binary messages until their concatenation contains want.
func readUntil(t *testing.T, ctx context.Context, c *websocket.Conn, want string) {
	t.Helper()
	var got []byte
	for !strings.Contains(string(got), want) {
		typ, p, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read, waiting for %q after %q: %v", want, got, err)
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("message type = %v, want binary", typ)
		}
		got = append(got, p...)
	}
}

func write(t *testing.T, ctx context.Context, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
}

func TestWebSocketProtocol(t *testing.T) {
	term := newFakeTerm("proto")
	base := startServer(t, sessions{testKey: term})
	ctx := testContext(t)
	c := dial(t, ctx, base)

	readUntil(t, ctx, c, scrollback)
	term.emit("live line\r\n")
	readUntil(t, ctx, c, "live line")

	// Messages the server cannot use are skipped; the connection stays.
	write(t, ctx, c, `not json`)
	write(t, ctx, c, `{"t":"r","c":-1,"r":99999}`)
	write(t, ctx, c, `{"t":"x"}`)
	if err := c.Write(ctx, websocket.MessageBinary, []byte("raw")); err != nil {
		t.Fatalf("write binary: %v", err)
	}

	write(t, ctx, c, `{"t":"i","d":"ls -l\r\u0003"}`)
	term.waitInput(t, "ls -l\r\x03")
	readUntil(t, ctx, c, "ls -l")

	write(t, ctx, c, `{"t":"r","c":100,"r":30}`)
	term.waitFor(t, "resize 100x30", func() bool { return len(term.sizes) > 0 })
	input, sizes := term.snapshot()
	if len(sizes) != 1 || sizes[0] != [2]int{100, 30} {
		t.Errorf("sizes = %v, want [[100 30]] (invalid sizes dropped)", sizes)
	}
	if input != "ls -l\r\x03" {
		t.Errorf("input = %q, want only the valid input message", input)
	}
}

func TestWebSocketCrossOriginRefused(t *testing.T) {
	term := newFakeTerm("victim")
	base := startServer(t, sessions{testKey: term})
	ctx := testContext(t)
	for _, origin := range []string{"http://evil.example", "http://127.0.0.1:1", "null"} {
		c, resp, err := websocket.Dial(ctx, wsURL(base, testKey), &websocket.DialOptions{
			HTTPHeader: http.Header{"Origin": {origin}},
		})
		if err == nil {
			c.CloseNow()
			t.Errorf("Origin %s: dial succeeded, want refusal", origin)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %s: response %v, want 403", origin, resp)
		}
	}
	term.mu.Lock()
	defer term.mu.Unlock()
	if term.watchers != 0 {
		t.Errorf("a refused viewer reached the terminal: %d watchers", term.watchers)
	}
}

func TestWebSocketSessionEnded(t *testing.T) {
	term := newFakeTerm("ending")
	base := startServer(t, sessions{testKey: term})
	ctx := testContext(t)
	c := dial(t, ctx, base)
	readUntil(t, ctx, c, scrollback)
	term.end()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "session ended" {
		t.Fatalf("read after end = %v, want close 1000 \"session ended\"", err)
	}
}

func TestWebSocketMessageTooBig(t *testing.T) {
	term := newFakeTerm("big")
	base := startServer(t, sessions{testKey: term})
	ctx := testContext(t)
	c := dial(t, ctx, base)
	readUntil(t, ctx, c, scrollback)
	big := `{"t":"i","d":"` + strings.Repeat("x", 64<<10) + `"}`
	c.Write(ctx, websocket.MessageText, []byte(big)) // may fail once the server closes
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("read after a %d-byte message = %v, want close %v", len(big), err, websocket.StatusMessageTooBig)
	}
	if input, _ := term.snapshot(); input != "" {
		t.Errorf("oversized input reached the terminal")
	}
}

func TestServeShutdownClosesViewers(t *testing.T) {
	term := newFakeTerm("shutdown")
	base, stop := startStoppable(t, sessions{testKey: term}, nil)
	ctx := testContext(t)
	c := dial(t, ctx, base)
	readUntil(t, ctx, c, scrollback)

	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusGoingAway {
		t.Errorf("read during shutdown = %v, want close %v", err, websocket.StatusGoingAway)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Serve = %v, want nil after shutdown", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get(base + "/"); err == nil {
		t.Error("server still answers after shutdown")
	}
}
