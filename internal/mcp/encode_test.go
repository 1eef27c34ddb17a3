package mcp

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
)

// TestEncodeOnceMatchesSDK: tandem's single encoding of a tool result is
// the same JSON the go-sdk writes for it, whatever the reply holds and
// whatever the SDK added to the result after the handler.
func TestEncodeOnceMatchesSDK(t *testing.T) {
	big := strings.Repeat("line \"quoted\" <tag> & \\ tab\t é 😀\n", 20000)
	for _, tc := range []struct {
		name  string
		reply reply
		meta  mcp.Meta
	}{
		{"ok", ok(reply{"result": reply{"stdout": "hello\n", "exitCode": 0}}), nil},
		{"failure", fail(codeInvalidArguments, "Argument \"x\" is bad.", reply{"field": "x"}).reply(), nil},
		{"large and odd", ok(reply{"data": big, "control": "\x00\x1b[31m\u2028</script>"}), nil},
		{"with _meta", ok(reply{"n": 1}), mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "tandem"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := result(tc.reply)
			res.Meta = tc.meta
			raw, ok := ownReply(res)
			if !ok {
				t.Fatal("ownReply does not recognise result()'s shape")
			}
			want, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(&encodedResult{CallToolResult: res, reply: raw})
			if err != nil {
				t.Fatal(err)
			}
			var w, g any
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("not JSON: %v\n%.300s", err, got)
			}
			if !reflect.DeepEqual(w, g) {
				t.Errorf("encodings differ:\nsdk:    %.400s\ntandem: %.400s", want, got)
			}
		})
	}
}

// TestEncodeResourceMatchesSDK: a resource read, encoded once by tandem,
// is the JSON the go-sdk writes for it, except that an empty text is
// there as "text":"" (the SDK drops it, which clients' schemas refuse).
func TestEncodeResourceMatchesSDK(t *testing.T) {
	big := strings.Repeat("line \"quoted\" <tag> & \\ tab\t é 😀\r\n", 20000)
	for _, tc := range []struct {
		name     string
		contents []*mcp.ResourceContents
		meta     mcp.Meta
		empty    bool
	}{
		{"text", []*mcp.ResourceContents{{URI: "tandem://output/c1/stdout", MIMEType: "text/plain", Text: big}}, nil, false},
		{"odd text", []*mcp.ResourceContents{{URI: "u", Text: "\x00\x1b[31m\u2028</script>"}}, nil, false},
		{"blob", []*mcp.ResourceContents{{URI: "u", MIMEType: "application/octet-stream", Blob: []byte{0, 0xff, 1}}}, nil, false},
		{"two, with _meta", []*mcp.ResourceContents{{URI: "a", Text: "x", Meta: mcp.Meta{"k": "v"}}, {URI: "b", Blob: []byte("y")}},
			mcp.Meta{"io.modelcontextprotocol/serverInfo": map[string]any{"name": "tandem"}}, false},
		{"empty text", []*mcp.ResourceContents{{URI: "u", MIMEType: "text/plain"}}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &mcp.ReadResourceResult{Contents: tc.contents, Meta: tc.meta}
			want, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(&encodedResource{ReadResourceResult: res})
			if err != nil {
				t.Fatal(err)
			}
			var w, g map[string]any
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("not JSON: %v\n%.300s", err, got)
			}
			if tc.empty {
				w["contents"].([]any)[0].(map[string]any)["text"] = ""
			}
			if !reflect.DeepEqual(w, g) {
				t.Errorf("encodings differ:\nsdk:    %.400s\ntandem: %.400s", want, got)
			}
		})
	}
}

// TestEncodeOnceLeavesOthers: a result that is not result()'s shape (a
// second content, a text that differs) keeps the SDK's own encoding.
func TestEncodeOnceLeavesOthers(t *testing.T) {
	res := result(ok(reply{"n": 1}))
	res.Content = append(res.Content, &mcp.TextContent{Text: "more"})
	if _, ok := ownReply(res); ok {
		t.Error("two contents taken for tandem's shape")
	}
	res = result(ok(reply{"n": 1}))
	res.Content[0].(*mcp.TextContent).Text = `{"n":2,"success":true}`
	if _, ok := ownReply(res); ok {
		t.Error("a text that is not the structured content taken for tandem's shape")
	}
}

// BenchmarkEncodeResult: the go-sdk's encoding of a 589 KB reply against
// tandem's single one, as the stdio connection writes it; "reply" is the
// reply object's own encoding (result), which both start from.
func BenchmarkEncodeResult(b *testing.B) {
	var sb strings.Builder
	for i := 1; i <= 100000; i++ {
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte('\n')
	}
	res := result(ok(reply{"data": sb.String(), "bytes": sb.Len()}))
	raw, _ := ownReply(res)
	b.Run("reply", func(b *testing.B) {
		// The reply object itself, as ssh_exec renders it with no bound.
		r := ok(reply{"commandId": "cmd_0123456789abcdef", "result": reply{
			"stdout": sb.String(), "stderr": "", "exitCode": 0, "durationMs": int64(12), "cwd": "/tmp",
		}})
		for b.Loop() {
			if res := result(r); res.IsError {
				b.Fatal("not encoded")
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("once", func(b *testing.B) {
		e := &encodedResult{CallToolResult: res, reply: raw}
		for b.Loop() {
			if _, err := e.encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	page := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "tandem://output/c1/stdout", MIMEType: "text/plain", Text: sb.String()}}}
	b.Run("resource-sdk", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(page); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("resource-once", func(b *testing.B) {
		e := &encodedResource{ReadResourceResult: page}
		for b.Loop() {
			if _, err := e.encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRunStashesResults: on a connection that Run serves, tool results
// go through the connection's stash (the SDK marshals a placeholder, the
// connection writes the encoding) and none is left behind; the client gets
// the reply as usual.
func TestRunStashesResults(t *testing.T) {
	m := session.NewManager(&session.Options{})
	t.Cleanup(m.Shutdown)
	s := New(Deps{Sessions: m})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}, outW) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); cancel(); <-done })
	for i := 0; i < 3; i++ {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"sessionName": "x", "sessionToken": "y", "command": "true"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"invalid_session_token"`) {
			t.Fatalf("reply: %+v", res)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stashes) != 1 {
		t.Fatalf("%d stashes, want the one connection's", len(s.stashes))
	}
	for _, st := range s.stashes {
		st.mu.Lock()
		n, left := st.n, len(st.m)
		st.mu.Unlock()
		if n != 3 || left != 0 {
			t.Errorf("stash: %d results through it (want 3), %d left behind", n, left)
		}
	}
}

// TestStashTake: only a placeholder of this stash, taken once, gives
// back an encoding.
func TestStashTake(t *testing.T) {
	st, other := newStash(), newStash()
	p := st.put([]byte(`{"a":1}`))
	if _, ok := other.take(p); ok {
		t.Error("another connection's stash took the placeholder")
	}
	for _, bad := range []string{`{"content":[]}`, placeholderPrefix + `x"}`, string(p[:len(p)-1])} {
		if _, ok := st.take([]byte(bad)); ok {
			t.Errorf("took %q", bad)
		}
	}
	if b, ok := st.take(p); !ok || string(b) != `{"a":1}` {
		t.Fatalf("take: %q %v", b, ok)
	}
	if _, ok := st.take(p); ok {
		t.Error("a placeholder was taken twice")
	}
}
