package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/stdio"
)

// stdioConn is tandem's MCP server behind the stdio guard, as `tandem
// serve` runs it, driven line by line.
type stdioConn struct {
	in    *io.PipeWriter
	lines chan []byte
}

func dialStdio(t testing.TB, f *fixture) *stdioConn {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	g := stdio.New(inR, outW, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = f.srv.MCP().Run(ctx, &sdk.IOTransport{Reader: g.Reader(), Writer: g.Writer()})
		close(done)
	}()
	c := &stdioConn{in: inW, lines: make(chan []byte, 64)}
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			c.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cancel()
		_ = inW.Close()
		<-done
		_ = outW.Close()
	})
	c.send(t, `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`)
	c.await(t, `"init"`)
	c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *stdioConn) send(t testing.TB, line string) {
	t.Helper()
	if _, err := c.in.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("the server stopped reading: %v", err)
	}
}

// await returns the response with the given JSON id, failing if the server
// stops answering.
func (c *stdioConn) await(t testing.TB, id string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatal("the server closed its output")
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(line, &m) != nil {
				t.Fatalf("the server wrote a line that is not JSON: %q", line)
			}
			if string(m["id"]) == id {
				var out map[string]any
				_ = json.Unmarshal(line, &out)
				return out
			}
		case <-timeout:
			t.Fatalf("no answer to %s", id)
		}
	}
}

// TestBadLinesKeepServing: lines that are not JSON-RPC get an error and
// the connection, with its sessions, lives on (issue 6 item 13).
func TestBadLinesKeepServing(t *testing.T) {
	f := newServer(t, 0)
	c := dialStdio(t, f)
	c.send(t, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"ssh_connect","arguments":{"name":"keep"}}}`)
	c.await(t, `"c"`)
	for _, tc := range []struct{ line, code string }{
		{"this is not json", "-32700"},
		{strings.Repeat("[", 100000), "-32700"},
		{strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000), "-32700"},
		{`[1,2]`, "-32600"},
	} {
		c.send(t, tc.line)
		r := c.await(t, "null")
		if e, _ := r["error"].(map[string]any); e == nil || jsonNumber(e["code"]) != tc.code {
			t.Errorf("%.40q: reply %v, want code %s", tc.line, r, tc.code)
		}
	}
	c.send(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`)
	c.await(t, `"p"`)
	c.send(t, `{"jsonrpc":"2.0","id":"l","method":"tools/call","params":{"name":"ssh_list_sessions","arguments":{}}}`)
	r := c.await(t, `"l"`)
	if !strings.Contains(toJSON(r), `keep`) {
		t.Fatalf("the session did not survive the bad lines: %v", r)
	}
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzStdioLines sends arbitrary lines to tandem's stdio server: it must
// keep answering.
func FuzzStdioLines(f *testing.F) {
	for _, s := range []string{
		"garbage", "{}", "[]", "null", `{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1,"method":"nope"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_exec","arguments":{"command":"x"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://output/x?page=2199023255552"}}`,
		`{"jsonrpc":"2.0","id":2,"result":{}}`, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		strings.Repeat("{", 200),
	} {
		f.Add(s)
	}
	fx := newServer(f, 0)
	f.Fuzz(func(t *testing.T, line string) {
		c := dialStdio(t, fx)
		c.send(t, strings.ReplaceAll(line, "\n", " "))
		c.send(t, `{"jsonrpc":"2.0","id":"alive","method":"ping"}`)
		c.await(t, `"alive"`)
	})
}
