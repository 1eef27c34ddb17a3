package shell

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

const testNonce = "0123456789abcdef0123456789abcdef"

// frame is one scanner output: data, or a mark rendered as "<Kind Text>".
type frame struct {
	mark string
	data string
}

func markName(ev *term.Event) string {
	if ev.Kind == term.Private {
		return fmt.Sprintf("<%s %s>", ev.Text, ev.Fields["id"]+ev.Fields["status"])
	}
	return "<" + ev.Kind.String() + ">"
}

// scan feeds pieces and returns the frames with adjacent data merged.
func scan(pieces ...[]byte) []frame {
	sc := newRelayScanner(testNonce)
	var out []frame
	for _, p := range pieces {
		sc.feed(p, func(b []byte, ev *term.Event) {
			if ev != nil {
				out = append(out, frame{mark: markName(ev)})
				return
			}
			if len(out) > 0 && out[len(out)-1].mark == "" {
				out[len(out)-1].data += string(b)
				return
			}
			out = append(out, frame{data: string(b)})
		})
	}
	return out
}

func mk(body string) string { return "\x1b]" + body + ";n=" + testNonce + "\x07" }

func TestRelayScanner(t *testing.T) {
	bom, eom, c, a := mk("633;X;bom;id=cmd_1"), mk("633;X;eom;status=3;ran=1;cwd=/"), mk("133;C"), mk("133;A")
	tests := []struct {
		name string
		in   string
		want []frame
	}{
		{"begin data end", "late" + bom + "out\x00\xff" + eom, []frame{{data: "late"}, {mark: "<bom cmd_1>"}, {data: "out\x00\xff"}, {mark: "<eom 3>"}}},
		{"C and A are marks", bom + "a" + c + "b" + a + eom, []frame{{mark: "<bom cmd_1>"}, {data: "a"}, {mark: "<CommandStart>"}, {data: "b"}, {mark: "<PromptStart>"}, {mark: "<eom 3>"}}},
		{"wrong nonce is output", "\x1b]633;X;eom;n=deadbeef\x07", []frame{{data: "\x1b]633;X;eom;n=deadbeef\x07"}}},
		{"no nonce is output", "\x1b]133;D;0\x07x", []frame{{data: "\x1b]133;D;0\x07x"}}},
		{"other escapes pass", "\x1b[1mbold\x1b]0;title\x07", []frame{{data: "\x1b[1mbold\x1b]0;title\x07"}}},
		{"an unterminated forged mark before a real one", "\x1b]133;A" + eom, []frame{{data: "\x1b]133;A"}, {mark: "<eom 3>"}}},
		{"partial mark held", "x\x1b]633;X;eo", []frame{{data: "x"}}},
		{"partial intro held", "x\x1b]63", []frame{{data: "x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := scan([]byte(tc.in))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			var pieces [][]byte
			for i := range len(tc.in) {
				pieces = append(pieces, []byte{tc.in[i]})
			}
			if bb := scan(pieces...); fmt.Sprint(bb) != fmt.Sprint(got) {
				t.Fatalf("byte by byte: %q", bb)
			}
		})
	}
}

func TestRelayScannerLongCandidateIsOutput(t *testing.T) {
	in := "\x1b]133;" + string(bytes.Repeat([]byte("x"), maxRelayMark+10))
	got := scan([]byte(in))
	var data string
	for _, f := range got {
		data += f.data
	}
	if data != in {
		t.Fatalf("a long unterminated candidate must pass as output: got %d bytes, want %d", len(data), len(in))
	}
}

func TestSyntaxMessage(t *testing.T) {
	for _, tc := range []struct{ echo, cmd, want string }{
		{"echo (\r\n\x1b[?2004l\rbash: syntax error near unexpected token `('\r\n", "echo (", "bash: syntax error near unexpected token `('\n"},
		{"echo (\r\nbash: oops\r\n", "echo (", "bash: oops\n"},
	} {
		if got := syntaxMessage([]byte(tc.echo), tc.cmd); got != tc.want {
			t.Errorf("syntaxMessage(%q) = %q, want %q", tc.echo, got, tc.want)
		}
	}
}

func TestToCRLF(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb\n": "a\r\nb\r\n", "a\r\nb": "a\r\nb", "\n": "\r\n", "": "", "\n\n": "\r\n\r\n",
		"\r\n\n": "\r\n\r\n", "x\r": "x\r", "\r\r\n": "\r\r\n", "no newline": "no newline",
	} {
		if got := string(toCRLF(nil, []byte(in))); got != want {
			t.Errorf("toCRLF(%q) = %q, want %q", in, got, want)
		}
		// Appending keeps what dst held, whatever its spare capacity.
		dst := make([]byte, 3, 4)
		copy(dst, "old")
		if got := string(toCRLF(dst, []byte(in))); got != "old"+want {
			t.Errorf("toCRLF(old, %q) = %q, want %q", in, got, "old"+want)
		}
	}
}

// FuzzFrames checks that where a stream is cut never changes what the
// scanner finds, and that output is exactly the input minus trusted marks.
func FuzzFrames(f *testing.F) {
	f.Add([]byte("x"+mk("633;X;bom;id=a")+"payload"+mk("633;X;eom;status=0")+"y"), 5)
	f.Add([]byte("\x1b]633;X;bom;n="+testNonce), 3)
	f.Add([]byte("\x1b]133;A\x1b]133;C;n="+testNonce+"\x07"), 9)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if len(in) == 0 {
			return
		}
		cut = ((cut % len(in)) + len(in)) % len(in)
		end := []byte(mk("633;X;eom;status=0"))
		closed := append(bytes.Clone(in), end...)
		whole, split := scan(closed), scan(closed[:cut], closed[cut:])
		if fmt.Sprint(whole) != fmt.Sprint(split) {
			t.Fatalf("split at %d changed the frames: %q vs %q", cut, whole, split)
		}
		// The data never contains a trusted mark's nonce suffix followed by BEL
		// unless the input had one that was not a mark.
		var data bytes.Buffer
		marks := 0
		for _, fr := range whole {
			data.WriteString(fr.data)
			if fr.mark != "" {
				marks++
			}
		}
		if marks == 0 {
			t.Fatalf("the closing end mark was not found in %q", closed)
		}
		if data.Len() > len(closed) {
			t.Fatalf("more data out than in")
		}
	})
}
