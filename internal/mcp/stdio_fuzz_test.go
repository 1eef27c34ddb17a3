package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strconv"
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
		out := g.Writer()
		_ = f.srv.Run(ctx, &sdk.IOTransport{Reader: g.Reader(), Writer: out}, out)
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

// TestResultsEncodedOnce: on the stdio connection tandem writes each tool
// result's JSON itself (see Server.Run). The line on the wire is one whole
// JSON-RPC response with the right id; its text and structured content
// are the same reply, byte for byte in the output, even when the output
// looks like tandem's own placeholder; failures keep isError.
func TestResultsEncodedOnce(t *testing.T) {
	f := newServer(t, -1) // no bound: the whole output inline
	c := dialStdio(t, f)
	c.send(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_connect","arguments":{"name":"wire"}}}`)
	tok := structured(t, c.await(t, `7`))["sessionToken"].(string)
	const odd = `{"tandemEncodedResult":"0-1"} </script> \u2028 é 😀 "q" \\`
	cmd := `printf '%s\n' '` + odd + `'; seq 1 50000`
	want := odd + "\n" + seqText(50000)
	args, _ := json.Marshal(map[string]any{"sessionName": "wire", "sessionToken": tok, "command": cmd})
	c.send(t, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"ssh_exec","arguments":`+string(args)+`}}`)
	r := structured(t, c.await(t, `"big"`))
	if got := r["result"].(map[string]any)["stdout"]; got != want {
		t.Fatalf("stdout differs: %d bytes, want %d", len(got.(string)), len(want))
	}
	c.send(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ssh_exec","arguments":{"sessionName":"wire","sessionToken":"wrong","command":"true"}}}`)
	bad := c.await(t, `8`)
	if res := bad["result"].(map[string]any); res["isError"] != true || structured(t, bad)["error"] != "invalid_session_token" {
		t.Fatalf("a failure lost its shape: %v", bad)
	}
}

// structured returns a tools/call response's structuredContent, after
// checking that content[0].text is the same reply.
func structured(t *testing.T, resp map[string]any) map[string]any {
	t.Helper()
	res, _ := resp["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	content, _ := res["content"].([]any)
	if sc == nil || len(content) != 1 {
		t.Fatalf("not a tool result: %.300v", resp)
	}
	var text map[string]any
	if err := json.Unmarshal([]byte(content[0].(map[string]any)["text"].(string)), &text); err != nil {
		t.Fatalf("content[0].text is not JSON: %v", err)
	}
	if toJSON(text) != toJSON(sc) {
		t.Fatalf("content[0].text and structuredContent differ")
	}
	return sc
}

func seqText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}
