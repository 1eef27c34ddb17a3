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
// JSON of all inline output fits; a whole stream is its rendering; a cut
// stream is the rendering of a head and of a tail of at least as many of
// its bytes, which do not overlap and end (start) on a line when one ends
// near the cut.
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
		want, sl := streams[i], p.slots[i]
		total += inlineJSON(t, r)
		if r["stdoutTruncated"] != true {
			checkPiece(t, r, "stdout", want)
			continue
		}
		h, tl := sl.head.raw, sl.tail.raw
		if tl < h || h+tl > len(want) {
			t.Fatalf("stream %d: head %d bytes, tail %d, stream %d", i, h, tl, len(want))
		}
		checkPiece(t, r, "stdout", want[:h])
		checkPiece(t, r, "stdoutTail", want[len(want)-tl:])
		if r["stdoutEncoding"] == nil && h > 0 && want[h-1] != '\n' && bytes.IndexByte(want[max(0, h-lineSnap):h], '\n') >= 0 {
			t.Fatalf("stream %d: the head ends mid-line, %d bytes after a line end", i, h-1-bytes.LastIndexByte(want[:h], '\n'))
		}
		if st := len(want) - tl; r["stdoutTailEncoding"] == nil && st > 0 && want[st-1] != '\n' &&
			bytes.IndexByte(want[st:max(st, min(len(want)-1, st+lineSnap))], '\n') >= 0 {
			t.Fatalf("stream %d: the tail starts mid-line, before a line end at %d", i, bytes.IndexByte(want[st:], '\n'))
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

// checkPiece checks that field name of r is raw as sent: the exact bytes
// in base64, or its text with the flags that say how it differs.
func checkPiece(t testing.TB, r reply, name string, raw []byte) {
	t.Helper()
	got := decoded(t, r, name)
	if r[name+"Encoding"] == "base64" {
		if !bytes.Equal(got, raw) {
			t.Fatalf("%s: base64 of %q, want %q", name, got, raw)
		}
		return
	}
	text, frames := collapseFrames(raw)
	text, replaced := validText(text)
	if !bytes.Equal(got, text) || (r[name+"Lossy"] == true) != (replaced > 0) || r[name+"FramesCollapsed"] != nil != (frames > 0) {
		t.Fatalf("%s: %q (lossy %v, frames %v) for %q", name, got, r[name+"Lossy"], r[name+"FramesCollapsed"], raw)
	}
}

// progressBar is what a progress bar prints: n frames on one line, each
// drawn over the last, and a line after it.
func progressBar(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "\rdownloading %d/%d", i, n)
	}
	b.WriteString("\ndone\n")
	return b.Bytes()
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
		{"latin-1", 100, [][]byte{bytes.Repeat([]byte("caf\xe9 cr\xe8me\n"), 100)}, []bool{true}},
		{"invalid bytes cost three", 17, [][]byte{bytes.Repeat([]byte("\xe9abc"), 3)}, []bool{true}},
		{"long lines", 4096, [][]byte{bytes.Repeat([]byte(strings.Repeat("x", 3000)+"\n"), 10)}, []bool{true}},
		{"progress bar fits collapsed", 1024, [][]byte{progressBar(20000)}, []bool{false}},
		{"no bound", 0, [][]byte{seq(100000)}, []bool{false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := checkPlan(t, tc.budget, tc.streams...)
			for i, r := range rs {
				if got := r["stdoutTruncated"] == true; got != tc.cut[i] {
					t.Errorf("stream %d cut=%v, want %v", i, got, tc.cut[i])
				}
				// Each piece is judged on its own bytes: on a long,
				// uniform stream, alike.
				if len(tc.streams[i]) > 1000 && mostlyBinary(tc.streams[i]) == (r["stdoutEncoding"] == nil) {
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
// what is inline is the rendering of exact parts of the stream.
func FuzzPlan(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte("err\n"), uint16(1024))
	f.Add(bytes.Repeat([]byte("日\n\"\\<"), 300), []byte{0xff, 0xfe}, uint16(64))
	f.Add([]byte("\u2028\u2028\u2028"), []byte(""), uint16(5))
	f.Add(progressBar(300), []byte("caf\xe9\r\r\n"), uint16(100))
	f.Add(bytes.Repeat([]byte("ab\rc\n"), 500), []byte("\x00\x01"), uint16(300))
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

// BenchmarkPlanFlood: laying out the reply of seq 1 100000 (589 KB) under
// the default budget: the scan for redraws, the head and tail windows and
// their rendering.
func BenchmarkPlanFlood(b *testing.B) {
	var buf bytes.Buffer
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&buf, "%d\n", i)
	}
	s := testServer(32 << 10)
	for b.Loop() {
		p := s.plan(session.Caller{})
		p.add(reply{}, "c", "stdout", memCapture{buf.Bytes()})
		p.add(reply{}, "c", "stderr", memCapture{nil})
		p.fill()
	}
}
