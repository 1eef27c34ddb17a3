package jsonstr_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/jsonstr"
)

// decode is what a JSON reader makes of Append's output; it fails the
// test when that output is not one valid JSON string.
func decode(t *testing.T, enc []byte) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(enc, &s); err != nil {
		t.Fatalf("Append wrote invalid JSON %q: %v", enc, err)
	}
	return s
}

func TestAppend(t *testing.T) {
	tests := []struct {
		name, in, want string // want: the exact encoding
	}{
		{"empty", "", `""`},
		{"plain", "hello world", `"hello world"`},
		{"crlf", "a\r\nb\r\n", `"a\r\nb\r\n"`},
		{"lone cr and lf", "\r\r\n\n\r", `"\r\r\n\n\r"`},
		{"quotes and backslashes", `say "hi" \o/`, `"say \"hi\" \\o/"`},
		{"tab and controls", "\t\x00\x1b[0m\x7f", `"\t\u0000\u001b[0m` + "\x7f" + `"`},
		{"html stays", "<a & b>", `"<a & b>"`},
		{"utf-8 stays", "héllo 😀", `"héllo 😀"`},
		{"invalid utf-8", "a\xffb\xc3", `"a\ufffdb\ufffd"`},
		{"line separators", "x\u2028y\u2029", `"x\u2028y\u2029"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := jsonstr.Append([]byte("pre"), []byte(tc.in))
			if string(got) != "pre"+tc.want {
				t.Errorf("Append(%q) = %s, want %s", tc.in, got[3:], tc.want)
			}
			if back := decode(t, got[3:]); utf8.ValidString(tc.in) && back != tc.in {
				t.Errorf("decodes to %q, want %q", back, tc.in)
			}
		})
	}
}

// FuzzAppend: whatever the bytes, the output is one JSON string that
// decodes to them, with each invalid byte replaced by U+FFFD.
func FuzzAppend(f *testing.F) {
	f.Add([]byte("1\r\n2\r\n\"\\\u2028\xff\x00"))
	f.Add([]byte("\xf0\x9f\x98"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := decode(t, jsonstr.Append(nil, b))
		var want strings.Builder
		for rest := b; len(rest) > 0; {
			r, n := utf8.DecodeRune(rest)
			want.WriteRune(r) // RuneError for each invalid byte
			rest = rest[n:]
		}
		if got != want.String() {
			t.Errorf("Append(%q) decodes to %q, want %q", b, got, want.String())
		}
	})
}

// BenchmarkAppend encodes what seq 1 100000 prints through a terminal,
// beside encoding/json's string encoder on the same text.
func BenchmarkAppend(b *testing.B) {
	var buf bytes.Buffer
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&buf, "%d\r\n", i)
	}
	text := buf.Bytes()
	b.Run("jsonstr", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		var dst []byte
		for b.Loop() {
			dst = jsonstr.Append(dst[:0], text)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		s := string(text)
		for b.Loop() {
			_, _ = json.Marshal(s)
		}
	})
}
