package stdio

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHandOff: an ssh_upload call's long content leaves the line for a
// reference that Content turns back into it, once; any other line, and
// content that is escaped, named twice, short or of another tool, goes on
// as sent.
func TestHandOff(t *testing.T) {
	big := strings.Repeat("QUJD", handOffBytes/2)
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + name + `,"arguments":{` + args + `}}}`
	}
	tests := []struct {
		name, line string
		handed     bool
	}{
		{"upload", call(`"ssh_upload"`, `"sessionName":"s","content":"`+big+`","encoding":"base64"`), true},
		{"spaces", ` {"jsonrpc":"2.0", "id":1, "method":"tools/call", "params": { "arguments" : { "content" : "` + big + `" } , "name" : "ssh_upload" } }`, true},
		{"short", call(`"ssh_upload"`, `"content":"QUJD"`), false},
		{"escaped", call(`"ssh_upload"`, `"content":"`+big+`\n"`), false},
		{"twice", call(`"ssh_upload"`, `"content":"`+big+`","content":"x"`), false},
		{"other tool", call(`"ssh_exec"`, `"content":"`+big+`"`), false},
		{"tool name escaped", call(`"ssh\u005fupload"`, `"content":"`+big+`"`), false},
		{"key escaped", call(`"ssh_upload"`, `"c\u006fntent":"`+big+`"`), false},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}}}`, false},
		{"nested", call(`"ssh_upload"`, `"x":{"content":"`+big+`"}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewSized(strings.NewReader(""), &strings.Builder{}, nil, 0)
			reply, sc := check([]byte(tc.line))
			if reply != nil {
				t.Fatalf("refused: %s", reply)
			}
			out := g.handOffLine([]byte(tc.line), sc)
			if !tc.handed {
				if string(out) != tc.line {
					t.Fatalf("line changed: %.200s", out)
				}
				return
			}
			if Check(out) != nil || len(out) > 1000 {
				t.Fatalf("line with the reference: %.300s", out)
			}
			var m struct {
				Params struct {
					Arguments map[string]any `json:"arguments"`
				} `json:"params"`
			}
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatal(err)
			}
			ref := m.Params.Arguments["content"].(string)
			if got, err := g.Content(ref); err != nil || got != big {
				t.Fatalf("Content(%q) = %d bytes, %v", ref, len(got), err)
			}
			if _, err := g.Content(ref); !errors.Is(err, ErrContentDropped) {
				t.Fatalf("a second Content(%q): %v, want ErrContentDropped", ref, err)
			}
			// A string that is no reference of this guard's is itself.
			for _, s := range []string{"QUJD", ref[:len(ref)-1] + "9", "tandem-stdio-content-00-1"} {
				if got, err := g.Content(s); err != nil && !strings.HasPrefix(s, g.hand.prefix) || err == nil && got != s {
					t.Fatalf("Content(%q) = %q, %v", s, got, err)
				}
			}
		})
	}
}

// TestHandOffBound: the guard holds at most twice its longest line of
// contents; the oldest goes first, and its upload is told so.
func TestHandOffBound(t *testing.T) {
	g := NewSized(strings.NewReader(""), &strings.Builder{}, nil, 0) // MaxLine: 16 MiB
	content := strings.Repeat("x", 12<<20)
	var refs []string
	for range 3 {
		refs = append(refs, g.hand.put(content))
	}
	if _, err := g.Content(refs[0]); !errors.Is(err, ErrContentDropped) {
		t.Fatalf("the oldest of three 12 MiB contents: %v, want ErrContentDropped", err)
	}
	for _, r := range refs[1:] {
		if got, err := g.Content(r); err != nil || len(got) != len(content) {
			t.Fatalf("Content: %d bytes, %v", len(got), err)
		}
	}
	if g.hand.held != 0 || len(g.hand.order) != 0 {
		t.Fatalf("after every content was taken: %d bytes, %d references held", g.hand.held, len(g.hand.order))
	}
}

// TestHandOffExpires: a content whose upload never takes it (its
// arguments refused before it ran) is dropped after the guard's TTL.
func TestHandOffExpires(t *testing.T) {
	g := NewSized(strings.NewReader(""), &strings.Builder{}, nil, 0)
	g.hand.ttl = 10 * time.Millisecond
	ref := g.hand.put("content")
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.hand.mu.Lock()
		held, n := g.hand.held, len(g.hand.m)
		g.hand.mu.Unlock()
		if held == 0 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held after 10 s: %d bytes", held)
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := g.Content(ref); !errors.Is(err, ErrContentDropped) {
		t.Fatalf("Content after the TTL: %v, want ErrContentDropped", err)
	}
}
