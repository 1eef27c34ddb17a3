package mcp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
)

// memCapture is a stream held in memory.
type memCapture struct{ b []byte }

func (m memCapture) Size() int64 { return int64(len(m.b)) }
func (m memCapture) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.b).ReadAt(p, off)
}
func (m memCapture) Persist() (string, error) { return "/nonexistent/spool", nil }
func (m memCapture) Lost() int64              { return 0 }
func (m memCapture) Err() error               { return nil }

// testServer is just enough of a Server to lay out replies.
func testServer(budget int) *Server {
	return &Server{deps: Deps{InlineOutputBytes: budget}, log: slog.New(slog.DiscardHandler), outputs: &outputs{m: map[string]storedOutput{}}}
}

// decoded returns field name of r as bytes, undoing base64.
func decoded(t testing.TB, r reply, name string) []byte {
	t.Helper()
	v, _ := r[name].(string)
	if r[name+"Encoding"] == "base64" {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	return []byte(v)
}

// inlineJSON is the JSON length of every output string in r, without quotes.
func inlineJSON(t testing.TB, r reply) int {
	n := 0
	for _, f := range []string{"stdout", "stdoutTail", "stderr", "stderrTail"} {
		if v, ok := r[f].(string); ok {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			n += len(b) - 2
		}
	}
	return n
}

// checkPlan lays out streams under budget and checks the contract: the
// JSON of all inline output fits, whole streams are exact, cut streams are
// an exact head and an exact, no shorter tail that do not overlap.
func checkPlan(t testing.TB, budget int, streams ...[]byte) []reply {
	t.Helper()
	s := testServer(budget)
	p := s.plan(session.Caller{})
	var rs []reply
	for i, b := range streams {
		r := reply{}
		rs = append(rs, r)
		p.add(r, fmt.Sprint("cmd", i), "stdout", memCapture{b})
	}
	p.fill()
	total := 0
	for i, r := range rs {
		want := streams[i]
		total += inlineJSON(t, r)
		head := decoded(t, r, "stdout")
		if r["stdoutTruncated"] != true {
			if !bytes.Equal(head, want) {
				t.Fatalf("stream %d inline but not exact: %q want %q", i, head, want)
			}
			continue
		}
		tail := decoded(t, r, "stdoutTail")
		if !bytes.HasPrefix(want, head) || !bytes.HasSuffix(want, tail) {
			t.Fatalf("stream %d: head %q / tail %q not exact for %q", i, head, tail, want)
		}
		if len(tail) < len(head) || len(head)+len(tail) > len(want) {
			t.Fatalf("stream %d: head %d bytes, tail %d, stream %d", i, len(head), len(tail), len(want))
		}
		if r["stdoutBytes"] != int64(len(want)) || r["stdoutResource"] == nil {
			t.Fatalf("stream %d: bytes %v resource %v", i, r["stdoutBytes"], r["stdoutResource"])
		}
	}
	if budget > 0 && total > budget {
		t.Fatalf("inline output is %d JSON bytes, over the budget of %d", total, budget)
	}
	return rs
}

func TestJSONCostMatchesEncoder(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\n\r\t\x00\x1b\x7f", "<tag>&amp;", "é ü 日本", "\u2028\u2029x", "─│┌"} {
		b, _ := json.Marshal(s)
		if got := jsonCost([]byte(s)); got != len(b)-2 {
			t.Errorf("jsonCost(%q) = %d, encoding/json writes %d", s, got, len(b)-2)
		}
	}
}

func TestPlan(t *testing.T) {
	seq := func(n int) []byte {
		var b bytes.Buffer
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d\n", i)
		}
		return b.Bytes()
	}
	tests := []struct {
		name    string
		budget  int
		streams [][]byte
		cut     []bool
	}{
		{"fits", 1024, [][]byte{[]byte("hello\n"), []byte("")}, []bool{false, false}},
		{"exactly fits", 12, [][]byte{[]byte("hello\n"), []byte("bye\n")}, []bool{false, false}},
		{"one flood, one short error", 2048, [][]byte{seq(5000), []byte("error: disk full\n")}, []bool{true, false}},
		{"two floods share", 2048, [][]byte{seq(5000), seq(3000)}, []bool{true, true}},
		{"escapes count", 64, [][]byte{bytes.Repeat([]byte("\x1b"), 20)}, []bool{true}},
		{"multibyte never split", 31, [][]byte{[]byte(strings.Repeat("日本語", 20))}, []bool{true}},
		{"binary", 100, [][]byte{bytes.Repeat([]byte{0xff, 0x00, 0x80}, 100)}, []bool{true}},
		{"no bound", 0, [][]byte{seq(100000)}, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := checkPlan(t, tc.budget, tc.streams...)
			for i, r := range rs {
				if got := r["stdoutTruncated"] == true; got != tc.cut[i] {
					t.Errorf("stream %d cut=%v, want %v", i, got, tc.cut[i])
				}
				if tc.cut[i] && !utf8.Valid(tc.streams[i]) == (r["stdoutEncoding"] == nil) {
					t.Errorf("stream %d: encoding %v", i, r["stdoutEncoding"])
				}
			}
		})
	}
}

// TestPlanShortStreamWhole: a short stderr beside a flood comes whole; the
// flood gets the rest of the budget.
func TestPlanShortStreamWhole(t *testing.T) {
	rs := checkPlan(t, 4096, bytes.Repeat([]byte("x"), 1<<20), []byte("fatal: boom\n"))
	if got := len(rs[0]["stdout"].(string)) + len(rs[0]["stdoutTail"].(string)); got < 4096-12-4 {
		t.Errorf("the flood used %d of the budget left", got)
	}
}

func TestPlanReportsLoss(t *testing.T) {
	s := testServer(1024)
	r := reply{}
	p := s.plan(session.Caller{})
	p.add(r, "c", "stdout", lossy{memCapture{[]byte("kept")}})
	p.fill()
	if r["stdout"] != "kept" || !strings.Contains(fmt.Sprint(r["stdoutError"]), "5 bytes of stdout after the first 4 were lost") {
		t.Errorf("reply %v", r)
	}
}

type lossy struct{ memCapture }

func (lossy) Lost() int64 { return 5 }
func (lossy) Err() error  { return errors.New("no space left on device") }

// FuzzPlan: whatever the bytes and the budget, the inline output fits and
// what is inline is exact.
func FuzzPlan(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte("err\n"), uint16(1024))
	f.Add(bytes.Repeat([]byte("日\n\"\\<"), 300), []byte{0xff, 0xfe}, uint16(64))
	f.Add([]byte("\u2028\u2028\u2028"), []byte(""), uint16(5))
	f.Fuzz(func(t *testing.T, a, b []byte, budget uint16) {
		checkPlan(t, int(budget), a, b)
	})
}

func TestTrimLines(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short\n", 6, "short\n"},
		{"aaaa\nbbbb\ncc\n", 6, "cc\n"},
		{"aaaaaaaaaaaa", 6, "aaaaaa"},
		{"xxxx日本語", 7, "本語"}, // the cut lands inside 日
		{"aaaa\nbbbbbbbbb", 6, "bbbbbb"},
	}
	for _, tc := range tests {
		if got := string(trimLines([]byte(tc.in), tc.max)); got != tc.want {
			t.Errorf("trimLines(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
