package term_test

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

// outputCases: what the operator's terminal gets of a program's output.
var outputCases = []struct {
	name, in, want string
}{
	{"text", "hello, wörld ✓\r\n\tok", "hello, wörld ✓\r\n\tok"},
	{"SGR and cursor motion", "\x1b[1;31mred\x1b[0m\x1b[2J\x1b[H\x1b[10;5H\x1b[3A\x1b[K", "\x1b[1;31mred\x1b[0m\x1b[2J\x1b[H\x1b[10;5H\x1b[3A\x1b[K"},
	{"truecolor SGR", "\x1b[38;2;10;20;30mx\x1b[48:5:200my", "\x1b[38;2;10;20;30mx\x1b[48:5:200my"},
	{"alt screen, bracketed paste, mouse, cursor", "\x1b[?1049h\x1b[?2004h\x1b[?1000;1006h\x1b[?25l\x1b[?1049l", "\x1b[?1049h\x1b[?2004h\x1b[?1000;1006h\x1b[?25l\x1b[?1049l"},
	{"scrolling region, save/restore", "\x1b[1;20r\x1b7\x1b8\x1b[s\x1b[u\x1bM\x1b=\x1b>", "\x1b[1;20r\x1b7\x1b8\x1b[s\x1b[u\x1bM\x1b=\x1b>"},
	{"charsets, DECALN, RIS", "\x1b(0qqq\x1b(B\x1b#8\x1bc", "\x1b(0qqq\x1b(B\x1b#8\x1bc"},
	{"cursor style", "\x1b[2 q", "\x1b[2 q"},
	{"hyperlink kept", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\a", "\x1b]8;;https://example.com\x1b\\link\x1b]8;;\a"},
	{"DSR", "a\x1b[6nb\x1b[5n", "ab"},
	{"DA1 DA2 DA3", "a\x1b[cb\x1b[0cc\x1b[>cd\x1b[=c", "abcd"},
	{"XTVERSION", "a\x1b[>qb\x1b[>0q", "ab"},
	{"DECRQM", "a\x1b[?2004$pb\x1b[4$p", "ab"},
	{"DECDSR and colour scheme", "a\x1b[?6n\x1b[?996n\x1b[?2031h", "a"},
	{"window ops and reports", "a\x1b[18t\x1b[21t\x1b[8;100;300t\x1b[9;1t\x1b[22;0t\x1b[2t", "a"},
	{"DECREQTPARM media copy", "a\x1b[x\x1b[5i\x1b[4i", "a"},
	{"DECRQCRA DECSNLS DECSCPP", "a\x1b[1;1;1;1;1;1*y\x1b[60*|\x1b[132$|", "a"},
	{"focus reporting", "a\x1b[?1004h\x1b[?1000;1004h", "a"},
	{"kitty and xterm settings", "a\x1b[>1u\x1b[?u\x1b[<u\x1b[=1;1u\x1b[>4;2m\x1b[?4m\x1b[>0s", "a"},
	{"XTSMGRAPHICS", "a\x1b[?1;1;0S", "a"},
	{"titles", "a\x1b]0;pwned\ab\x1b]2;x\x1b\\c\x1b]1;y\a", "abc"},
	{"clipboard write and read", "a\x1b]52;c;cm0gLXJmIH4=\ab\x1b]52;c;?\x1b\\", "ab"},
	{"colour set and query", "a\x1b]11;?\a\x1b]10;#ffffff\a\x1b]4;1;?\a\x1b]104\a\x1b]12;red\x1b\\", "a"},
	{"cwd, notifications, iTerm", "a\x1b]7;file://h/tmp\a\x1b]9;hi\a\x1b]777;notify;a;b\a\x1b]1337;File=x:AAAA\a", "a"},
	{"tandem marks are not the terminal's", "a\x1b]133;A\a\x1b]633;E;ls\a", "a"},
	{"DCS queries", "a\x1bP$qm\x1b\\b\x1bP+q544e\x1b\\", "ab"},
	{"tmux passthrough", "a\x1bPtmux;\x1b\x1b]52;c;eA==\a\x1b\\b", "ab"},
	{"sixel, APC, PM, SOS", "a\x1bPq#0;2;0;0;0~-\x1b\\b\x1b_Gf=100;AAAA\x1b\\c\x1b^pm\x1b\\d\x1bXsos\x1b\\", "abcd"},
	{"screen and tmux window name", "a\x1bkpwned\x1b\\b", "ab"},
	{"DECID and 8-bit switch", "a\x1bZb\x1b G\x1b F\x1b%@", "ab"},
	{"8-bit C1 controls", "a\x9b6nb\x9d0;t\x07c\x90$qm\x9cd\x9a\x85", "abcd"},
	{"UTF-8 encoded C1 controls", "a\xc2\x9b6nb\xc2\x9d52;c;eA==\xc2\x9cc\xc2\x90q\xc2\x9cd", "abcd"},
	{"continuation bytes are not C1", "\xe2\x9b\x9b\xe2\x9c\x9c", "\xe2\x9b\x9b\xe2\x9c\x9c"},
	{"invalid UTF-8 shown as is", "\xff\xc0a\xa0", "\xff\xc0a\xa0"},
	{"string aborted by CAN", "a\x1b]0;title\x18b", "a\x18b"},
	{"string aborted by ESC starts a new sequence", "a\x1b]0;title\x1b[31mb", "a\x1b[31mb"},
	{"CSI aborted by a control is dropped", "a\x1b[6\rn", "a\rn"},
	{"ESC ESC: the first is dropped, the query too", "\x1b\x1b[6n[6n", "[6n"},
	{"incomplete sequence at the end is held", "a\x1b[6", "a"},
	{"oversized CSI dropped whole", "a\x1b[" + string(bytes.Repeat([]byte("1;"), 400)) + "mb", "ab"},
	{"hyperlink with an OSC number prefix 80", "\x1b]80;x\a", ""},
}

func TestOutputFilter(t *testing.T) {
	for _, c := range outputCases {
		t.Run(c.name, func(t *testing.T) {
			var f term.OutputFilter
			if got := string(f.Write(nil, []byte(c.in))); got != c.want {
				t.Errorf("whole: got %q, want %q", got, c.want)
			}
			// One byte at a time: the same.
			var g term.OutputFilter
			var out []byte
			for i := range len(c.in) {
				out = g.Write(out, []byte{c.in[i]})
			}
			if string(out) != c.want {
				t.Errorf("bytewise: got %q, want %q", out, c.want)
			}
		})
	}
}

// inputCases: what reaches the session of the operator's terminal input.
var inputCases = []struct {
	name, in, want string
}{
	{"typing", "ls -la\r", "ls -la\r"},
	{"arrows, home, end, function keys", "\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1bOP\x1b[15~\x1b[1;5C\x1b[Z", "\x1b[A\x1b[B\x1b[C\x1b[D\x1b[H\x1b[F\x1bOP\x1b[15~\x1b[1;5C\x1b[Z"},
	{"Alt keys, Ctrl keys", "\x1bb\x1bf\x03\x04\x1b.\x1bk", "\x1bb\x1bf\x03\x04\x1b.\x1bk"},
	{"bracketed paste", "\x1b[200~echo hi\x1b[201~", "\x1b[200~echo hi\x1b[201~"},
	{"mouse reports", "\x1b[<0;10;5M\x1b[<0;10;5m\x1b[M #!", "\x1b[<0;10;5M\x1b[<0;10;5m\x1b[M #!"},
	{"kitty key", "\x1b[97;5u", "\x1b[97;5u"},
	{"cursor position report", "a\x1b[24;80Rb", "ab"},
	{"device attributes", "a\x1b[?62;22cb\x1b[>0;276;0c\x1b[?1;2c", "ab"},
	{"XTVERSION answer", "a\x1bP>|tmux 3.4\x1b\\b", "ab"},
	{"DECRQSS and XTGETTCAP answers", "a\x1bP1$r0m\x1b\\\x1bP1+r544e=787465726d\x1b\\b", "ab"},
	{"colour answers", "a\x1b]11;rgb:0000/0000/0000\x1b\\b\x1b]10;rgb:ffff/ffff/ffff\a", "ab"},
	{"mode reports", "a\x1b[?2004;1$yb\x1b[4;2$y", "ab"},
	{"window and status reports", "a\x1b[8;24;80t\x1b[4;600;800t\x1b[0n\x1b[?997;1nb", "ab"},
	{"focus events", "a\x1b[I\x1b[Ob", "ab"},
	{"kitty flags answer", "a\x1b[?1ub", "ab"},
	{"8-bit answer", "a\x9b24;80Rb", "ab"},
	{"UTF-8 typed", "é✓", "é✓"},
}

func TestAnswerFilter(t *testing.T) {
	for _, c := range inputCases {
		t.Run(c.name, func(t *testing.T) {
			var f term.AnswerFilter
			got := f.Write(nil, []byte(c.in))
			if f.Pending() {
				got = f.Flush(got)
			}
			if string(got) != c.want {
				t.Errorf("whole: got %q, want %q", got, c.want)
			}
			var g term.AnswerFilter
			var out []byte
			for i := range len(c.in) {
				out = g.Write(out, []byte{c.in[i]})
			}
			out = g.Flush(out)
			if string(out) != c.want {
				t.Errorf("bytewise: got %q, want %q", out, c.want)
			}
		})
	}
}

// TestAnswerFilterFlush: a sequence still open when input pauses is keys
// (Esc alone, Alt-[, Alt-P, Alt-]), passed whole by Flush.
func TestAnswerFilterFlush(t *testing.T) {
	for _, in := range []string{"\x1b", "\x1b[", "\x1bP", "\x1b]", "\x1b[1;", "\x1bPab\x1b", "\xe2\x9c"} {
		var f term.AnswerFilter
		got := f.Write(nil, []byte(in))
		if len(got) != 0 || !f.Pending() {
			t.Errorf("%q: passed %q before the pause, pending %v", in, got, f.Pending())
		}
		if got = f.Flush(got); string(got) != in {
			t.Errorf("%q: Flush gave %q", in, got)
		}
		if f.Pending() {
			t.Errorf("%q: still pending after Flush", in)
		}
		// After a flush the filter starts afresh.
		if got := f.Write(nil, []byte("x\x1b[6;1Ry")); string(got) != "xy" {
			t.Errorf("%q: after Flush: %q", in, got)
		}
	}
	// An unterminated string past the limit is keys, passed as it comes.
	var f term.AnswerFilter
	big := "\x1b]" + string(bytes.Repeat([]byte("a"), 70<<10))
	if got := f.Write(nil, []byte(big)); string(got) != big {
		t.Errorf("a 70 KiB open OSC: passed %d of %d bytes", len(got), len(big))
	}
}

// forbidden matches what must never leave the OutputFilter: the start of
// a string other than an OSC 8 hyperlink, DECID, a private CSI prefix, a
// query or report, and C1 controls in UTF-8.
var forbidden = regexp.MustCompile(`\x1b[PX^_Zk%]|\x1b\](?:[^8]|8[^;])|\x1b\[[<=>]|\x1b\[[0-9;]*[nctxi]|\x1b\[\?[0-9;]*(?:\$p|[nuSm])|\x1b \S|\xc2[\x80-\x9f]`)

// fuzzSeqs are sequences the fuzz target mixes into text: what each
// filter keeps (true) or removes.
var fuzzOutSeqs = []struct {
	s    string
	keep bool
}{
	{"\x1b[31m", true}, {"\x1b[?2004h", true}, {"\x1b]8;;http://x\a", true}, {"\x1b[2;3H", true},
	{"\x1b(0", true}, {"\x1b[?1049l", true}, {"\x1b7", true}, {"\x1b[0m", true},
	{"\x1b[6n", false}, {"\x1b[c", false}, {"\x1b[>q", false}, {"\x1b]52;c;eA==\a", false},
	{"\x1b]0;t\x1b\\", false}, {"\x1bP$qm\x1b\\", false}, {"\x9b6n", false}, {"\xc2\x9d11;?\xc2\x9c", false},
}

var fuzzInSeqs = []struct {
	s    string
	keep bool
}{
	{"\x1b[A", true}, {"\x1b[1;5D", true}, {"\x1b[200~", true}, {"\x1b[<0;1;1M", true},
	{"\x1bOP", true}, {"\x1b[15~", true}, {"\x1bb", true}, {"\x1b[Z", true},
	{"\x1b[24;80R", false}, {"\x1b[?62;22c", false}, {"\x1bP>|xterm(1)\x1b\\", false}, {"\x1b]11;rgb:0/0/0\a", false},
	{"\x1b[?2004;1$y", false}, {"\x1b[8;24;80t", false}, {"\x1b[I", false}, {"\x1b[0n", false},
}

// FuzzTerminalFilter: neither filter panics or depends on how its input
// is split; the OutputFilter's output never holds a removed sequence and
// is its own filtering; text between sequences passes unchanged.
func FuzzTerminalFilter(f *testing.F) {
	for _, c := range outputCases {
		f.Add([]byte(c.in), uint(len(c.in)/2), uint(1))
	}
	for _, c := range inputCases {
		f.Add([]byte(c.in), uint(len(c.in)/3), uint(2))
	}
	f.Add([]byte("ab\xf0c\xf8d\xe3\xebe"), uint(3), uint(5))
	f.Fuzz(func(t *testing.T, in []byte, a, b uint) {
		cuts := []int{int(a % uint(len(in)+1)), int(b % uint(len(in)+1))}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		chunks := [][]byte{in[:cuts[0]], in[cuts[0]:cuts[1]], in[cuts[1]:]}

		var whole term.OutputFilter
		want := whole.Write(nil, in)
		var split term.OutputFilter
		var got []byte
		for _, c := range chunks {
			got = split.Write(got, c)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("output filter: split at %v: %q, whole %q", cuts, got, want)
		}
		if m := forbidden.Find(want); m != nil {
			t.Fatalf("output filter passed %q in %q", m, want)
		}
		// Filtered again (with a newline, which ends a character the
		// output may end in the middle of), nothing changes.
		var again term.OutputFilter
		if twice := again.Write(nil, append(want, '\n')); !bytes.Equal(twice[:len(twice)-1], want) {
			t.Fatalf("output filter is not idempotent: %q, then %q", want, twice)
		}

		var wholeIn term.AnswerFilter
		wantIn := wholeIn.Flush(wholeIn.Write(nil, in))
		var splitIn term.AnswerFilter
		var gotIn []byte
		for _, c := range chunks {
			gotIn = splitIn.Write(gotIn, c)
		}
		if gotIn = splitIn.Flush(gotIn); !bytes.Equal(gotIn, wantIn) {
			t.Fatalf("answer filter: split at %v: %q, whole %q", cuts, gotIn, wantIn)
		}

		// The input as a script: bytes from 0xf0 up are sequences of
		// fuzzOutSeqs, 0xe0-0xef of fuzzInSeqs; printable ASCII and
		// \r\n\t are text. The text and the kept sequences pass unchanged,
		// in order, however split.
		var outIn, outWant, keyIn, keyWant []byte
		for _, c := range in {
			switch {
			case c >= 0xf0:
				sq := fuzzOutSeqs[c-0xf0]
				outIn = append(outIn, sq.s...)
				if sq.keep {
					outWant = append(outWant, sq.s...)
				}
			case c >= 0xe0:
				sq := fuzzInSeqs[c-0xe0]
				keyIn = append(keyIn, sq.s...)
				if sq.keep {
					keyWant = append(keyWant, sq.s...)
				}
			case c >= 0x20 && c < 0x7f || c == '\r' || c == '\n' || c == '\t':
				outIn, outWant = append(outIn, c), append(outWant, c)
				keyIn, keyWant = append(keyIn, c), append(keyWant, c)
			}
		}
		var of term.OutputFilter
		var o []byte
		at := int(a % uint(len(outIn)+1))
		o = of.Write(of.Write(o, outIn[:at]), outIn[at:])
		if !bytes.Equal(o, outWant) {
			t.Fatalf("output filter changed text or kept sequences:\n in %q\ngot %q\nwant %q", outIn, o, outWant)
		}
		var kf term.AnswerFilter
		at = int(b % uint(len(keyIn)+1))
		k := kf.Flush(kf.Write(kf.Write(nil, keyIn[:at]), keyIn[at:]))
		if !bytes.Equal(k, keyWant) {
			t.Fatalf("answer filter changed keys:\n in %q\ngot %q\nwant %q", keyIn, k, keyWant)
		}
	})
}
