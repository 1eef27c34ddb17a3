package mcp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// logWithLatin1 is a 60-line test log with one Latin-1 byte and a failure.
func logWithLatin1() []byte {
	var b bytes.Buffer
	for i := 1; i <= 60; i++ {
		switch i {
		case 30:
			b.WriteString("caf\xe9\n")
		case 59:
			b.WriteString("FAIL: TestCheckout (0.02s)\n")
		default:
			b.WriteString("ok   line " + strings.Repeat("x", i%7) + "\n")
		}
	}
	return b.Bytes()
}

func TestRender(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		text   string // "" when base64
		lossy  bool
		frames int
	}{
		{"plain", "hello\n", "hello\n", false, 0},
		{"empty", "", "", false, 0},
		{"latin-1", "caf\xe9\n", "caf\uFFFD\n", true, 0},
		{"each invalid byte", "xa\xff\xfebyyy", "xa\uFFFD\uFFFDbyyy", true, 0},
		{"a quarter is still text", "ok\xff\n", "ok\uFFFD\n", true, 0},
		{"colours are text", "\x1b[31mFAIL\x1b[0m\n", "\x1b[31mFAIL\x1b[0m\n", false, 0},
		{"a NUL is binary", "ab\x00cd", "", false, 0},
		{"mostly invalid is binary", "\xff\xfe\xfd\xfcab", "", false, 0},
		{"other controls count", "\x01\x02\x03a", "", false, 0},
		{"a progress bar", "\r10%\r50%\r100%\ndone\n", "100%\ndone\n", false, 3},
		{"redraws and an invalid byte", "caf\xe9 1\rcaf\xe9 2\n", "caf\uFFFD 2\n", true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := render([]byte(tc.in))
			if tc.text == "" && tc.in != "" {
				if !p.base64 || p.lossy || p.frames != 0 {
					t.Fatalf("%q: not base64: %+v", tc.in, p)
				}
				return
			}
			if p.base64 || p.text != tc.text || p.lossy != tc.lossy || p.frames != tc.frames || p.raw != len(tc.in) {
				t.Fatalf("%q: got %+v, want text %q lossy %v frames %d", tc.in, p, tc.text, tc.lossy, tc.frames)
			}
			if j, _ := json.Marshal(p.text); p.cost != len(j)-2 {
				t.Errorf("cost %d, encoding/json writes %d", p.cost, len(j)-2)
			}
		})
	}
}

// TestRenderLog is the case: one Latin-1 byte in a 60-line log no
// longer turns it all into base64.
func TestRenderLog(t *testing.T) {
	p := render(logWithLatin1())
	if p.base64 || !p.lossy || !strings.Contains(p.text, "FAIL: TestCheckout") || !strings.Contains(p.text, "caf\uFFFD\n") {
		t.Fatalf("%+v", p)
	}
}

func TestCollapseFrames(t *testing.T) {
	tests := []struct {
		in, want string
		frames   int
	}{
		{"no frames\n", "no frames\n", 0},
		{"crlf\r\nlines\r\n", "crlf\r\nlines\r\n", 0},
		{"a pty's doubled\r\r\n", "a pty's doubled\r\r\n", 0},
		{"\r1\r2\r3", "3", 3},
		{"1\r2\r3\r", "3\r", 2}, // a carriage return at the end is kept
		{"1%\r2%\r\n", "2%\r\n", 1},
		{"a\rb\nc\rd\n", "b\nd\n", 2},
		{"shown\r\r\rx\r\n", "x\r\n", 3},
		{"last\r\r\n", "last\r\r\n", 0},
		{"kept\r\rnot\r", "not\r", 2},
		{"\r\r\r", "\r\r\r", 0},
		{"empty frames\r\r\rlast\r", "last\r", 3},
		{"x\r\n\ry\rz\n", "x\r\nz\n", 2},
	}
	for _, tc := range tests {
		got, frames := collapseFrames([]byte(tc.in))
		if string(got) != tc.want || frames != tc.frames {
			t.Errorf("collapseFrames(%q) = %q, %d; want %q, %d", tc.in, got, frames, tc.want, tc.frames)
		}
	}
}

// TestHasFrames: a stream read in chunks finds a frame wherever it lies,
// across chunk boundaries too, and takes no line ending for one.
func TestHasFrames(t *testing.T) {
	pad := func(s string, at int) []byte {
		return append(bytes.Repeat([]byte("a\n"), at/2+1)[:at], s...)
	}
	tests := []struct {
		name string
		in   []byte
		want bool
	}{
		{"none", []byte("a\nb\r\nc\r\r\n"), false},
		{"one", []byte("a\rb"), true},
		{"at the end", []byte("a\r"), false},
		{"split after the carriage return", pad("\rx", frameScanChunk-1), true},
		{"split line end", pad("\r\n", frameScanChunk-1), false},
		{"a run split", pad("\r\r\r\n", frameScanChunk-2), false},
		{"a run split, then a frame", pad("\r\r\rx", frameScanChunk-2), true},
		{"a chunk of carriage returns", append(pad(strings.Repeat("\r", frameScanChunk+10), 10), 'x'), true},
		{"far", pad("\ry", 3*frameScanChunk+5), true},
	}
	for _, tc := range tests {
		if got := hasFrames(memCapture{tc.in}, int64(len(tc.in))); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := hasFrameCR(tc.in); got != tc.want {
			t.Errorf("%s: hasFrameCR %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSnap(t *testing.T) {
	long := strings.Repeat("y", 2*lineSnap)
	tests := []struct {
		name    string
		in      string
		at      int
		newline bool // the byte before in is a line end (tails)
		head    int
		tail    int
	}{
		{"on a boundary", "ab\ncd\n", 3, false, 3, 3},
		{"mid-line", "ab\ncd\nef", 4, false, 3, 6},
		{"no line end near", "x\n" + long, 2 + lineSnap + 5, false, 2 + lineSnap + 5, 2 + lineSnap + 5},
		{"a line end at the very end does not start a tail", "abcd\n", 1, false, 1, 1},
		{"the start after a line end", "abc\ndef", 0, true, 0, 0},
		{"the start mid-line", "abc\ndef", 0, false, 0, 4},
	}
	for _, tc := range tests {
		if got := snapHead([]byte(tc.in), tc.at); got != tc.head {
			t.Errorf("%s: snapHead = %d, want %d", tc.name, got, tc.head)
		}
		if got := snapTail([]byte(tc.in), tc.at, tc.newline); got != tc.tail {
			t.Errorf("%s: snapTail = %d, want %d", tc.name, got, tc.tail)
		}
	}
}

func TestWholeRunes(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want int
	}{
		{"abc", 3, 3},
		{"a日", 4, 4},
		{"a日", 3, 1},
		{"a日", 2, 1},
		{"a😀", 4, 1},
		{"caf\xe9", 4, 3}, // may be the start of a character
		{"caf\xe9x", 5, 5},
		{"\xa9\xa9\xa9\xa9", 4, 4}, // no start in reach: nothing to keep whole
		{"", 0, 0},
	}
	for _, tc := range tests {
		if got := wholeRunes([]byte(tc.in), tc.n); got != tc.want {
			t.Errorf("wholeRunes(%q, %d) = %d, want %d", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzCollapseFrames: collapsing keeps every line and its ending, leaves
// no frame behind (a second pass changes nothing), counts what it drops,
// and only ever shortens.
func FuzzCollapseFrames(f *testing.F) {
	f.Add([]byte("\r1\r2\r3\ndone\n"))
	f.Add([]byte("a\r\r\nb\r"))
	f.Add([]byte("\xe9\r\xe9x\r\r"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, frames := collapseFrames(b)
		if len(out) > len(b) || bytes.Count(out, []byte("\n")) != bytes.Count(b, []byte("\n")) {
			t.Fatalf("%q -> %q", b, out)
		}
		if again, n := collapseFrames(out); n != 0 || !bytes.Equal(again, out) || hasFrameCR(out) {
			t.Fatalf("%q -> %q -> %q (%d more frames)", b, out, again, n)
		}
		if (frames > 0) != hasFrameCR(b) || (frames == 0 && !bytes.Equal(out, b)) {
			t.Fatalf("%q -> %q, %d frames", b, out, frames)
		}
		if frames > bytes.Count(b, []byte("\r")) {
			t.Fatalf("%d frames dropped of %q", frames, b)
		}
		if utf8.Valid(b) && !utf8.Valid(out) {
			t.Fatalf("%q -> %q is no longer UTF-8", b, out)
		}
		if hasFrames(memCapture{b}, int64(len(b))) != hasFrameCR(b) {
			t.Fatalf("hasFrames and hasFrameCR disagree on %q", b)
		}
	})
}
