package term_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

const nonce = "0123456789abcdef0123456789abcdef"

// mark builds a trusted mark.
func mark(fields ...string) string { return string(term.Mark(nonce, fields...)) }

// item is a comparable form of term.Item.
type item struct {
	Data  string
	Event *term.Event
}

func (it item) String() string {
	if it.Event != nil {
		return fmt.Sprintf("event%+v", *it.Event)
	}
	return fmt.Sprintf("data%q", it.Data)
}

// feed feeds chunks to p and returns the items with adjacent Data merged.
func feed(p *term.Parser, chunks ...[]byte) []item {
	var out []item
	for _, c := range chunks {
		p.Feed(c, func(it term.Item) {
			if (it.Data == nil) == (it.Event == nil) {
				panic(fmt.Sprintf("item must have exactly one of Data and Event: %+v", it))
			}
			if it.Event != nil {
				out = append(out, item{Event: it.Event})
				return
			}
			if len(it.Data) == 0 {
				panic("empty Data item")
			}
			if n := len(out); n > 0 && out[n-1].Event == nil {
				out[n-1].Data += string(it.Data)
				return
			}
			out = append(out, item{Data: string(it.Data)})
		})
	}
	return out
}

func data(s string) item              { return item{Data: s} }
func event(e term.Event) item         { return item{Event: &e} }
func kind(k term.Kind) item           { return event(term.Event{Kind: k}) }
func exit(code int) item              { return event(term.Event{Kind: term.CommandEnd, Exit: code, HasExit: true}) }
func text(k term.Kind, s string) item { return event(term.Event{Kind: k, Text: s}) }

func checkItems(t *testing.T, got, want []item) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("items:\n got %v\nwant %v", got, want)
	}
}

func TestParserTrusted(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []item
	}{
		{"prompt start", mark("133", "A"), []item{kind(term.PromptStart)}},
		{"input start", mark("133", "B"), []item{kind(term.InputStart)}},
		{"command start", mark("133", "C"), []item{kind(term.CommandStart)}},
		{"command end", mark("133", "D", "0"), []item{exit(0)}},
		{"command end 130", mark("133", "D", "130"), []item{exit(130)}},
		{"command end no status", mark("133", "D"), []item{kind(term.CommandEnd)}},
		{"command end bad status", mark("133", "D", "x1"), []item{kind(term.CommandEnd)}},
		{"command end empty status", mark("133", "D", ""), []item{kind(term.CommandEnd)}},
		{"command line", mark("633", "E", term.Escape("echo 'a;b' \\ \t✓")),
			[]item{text(term.CommandLine, "echo 'a;b' \\ \t✓")}},
		{"empty command line", mark("633", "E", ""), []item{text(term.CommandLine, "")}},
		{"raw bytes in command line", mark("633", "E", "a\tb\x01\x7f"),
			[]item{text(term.CommandLine, "a\tb\x01\x7f")}},
		{"cwd", mark("633", "P", "Cwd="+term.Escape("/tmp/a;b\nc")),
			[]item{text(term.Cwd, "/tmp/a;b\nc")}},
		{"private", mark("633", "X", "done", "id=42", "flag", "v="+term.Escape("a=b;c")),
			[]item{event(term.Event{Kind: term.Private, Text: "done",
				Fields: map[string]string{"id": "42", "flag": "", "v": "a=b;c"}})}},
		{"private no fields", mark("633", "X", "ready"),
			[]item{text(term.Private, "ready")}},
		{"ST terminator", strings.TrimSuffix(mark("133", "D", "7"), "\a") + "\x1b\\",
			[]item{exit(7)}},
		{"around text", "out\r\n" + mark("133", "D", "1") + mark("133", "A") + "$ " + mark("133", "B"),
			[]item{data("out\r\n"), exit(1), kind(term.PromptStart), data("$ "), kind(term.InputStart)}},
		{"after ESC", "\x1b" + mark("133", "A"), []item{data("\x1b"), kind(term.PromptStart)}},
		{"after partial intro", "\x1b]13" + mark("133", "A") + "\x1b]63x",
			[]item{data("\x1b]13"), kind(term.PromptStart), data("\x1b]63x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := term.NewParser(nonce)
			checkItems(t, feed(p, []byte(tt.in)), tt.want)
			if p.Forged() != 0 {
				t.Errorf("Forged() = %d, want 0", p.Forged())
			}
		})
	}
}

func TestParserDropped(t *testing.T) {
	body := func(s string) string { return "\x1b]" + s + "\a" }
	other := strings.Repeat("f", len(nonce))
	tests := []struct {
		name   string
		nonce  string
		in     string
		want   string // display
		forged int
	}{
		{"no nonce", nonce, body("133;D;0"), "", 1},
		{"no fields", nonce, body("133"), "", 1},
		{"empty payload", nonce, body("133;"), "", 1},
		{"wrong nonce", nonce, body("133;D;0;n=" + other), "", 1},
		{"short nonce", nonce, body("133;D;0;n=" + nonce[:31]), "", 1},
		{"long nonce", nonce, body("133;D;0;n=" + nonce + "0"), "", 1},
		{"empty nonce field", nonce, body("133;D;0;n="), "", 1},
		{"nonce not last", nonce, body("133;D;n=" + nonce + ";0"), "", 1},
		{"nonce alone", nonce, body("133;n=" + nonce), "", 1},
		{"nonce without n=", nonce, body("133;D;0;" + nonce), "", 1},
		{"633 forged", nonce, body("633;E;rm -rf /"), "", 1},
		{"ST forged", nonce, "\x1b]133;D;0\x1b\\", "", 1},
		{"untrusting parser", "", mark("133", "D", "0"), "", 1},
		{"empty nonce mark", "", string(term.Mark("", "133", "A")), "", 1},
		{"bad escape", nonce, mark("633", "E", `a\qb`), "", 1},
		{"dangling escape", nonce, mark("633", "E", `ab\`), "", 1},
		{"cwd without key", nonce, mark("633", "P", "/tmp"), "", 1},
		{"cwd bad escape", nonce, mark("633", "P", `Cwd=\x4`), "", 1},
		{"extra field", nonce, mark("133", "A", "x"), "", 1},
		{"two statuses", nonce, mark("133", "D", "0", "1"), "", 1},
		{"command line in two fields", nonce, mark("633", "E", "a", "b"), "", 1},
		{"private without name", nonce, mark("633", "X"), "", 1},
		{"private empty name", nonce, mark("633", "X", ""), "", 1},
		{"private bad field", nonce, mark("633", "X", "n", `k=\`), "", 1},
		{"unknown letter", nonce, mark("133", "Z"), "", 0},
		{"letter of other code", nonce, mark("133", "E", "ls"), "", 0},
		{"long letter", nonce, mark("633", "XX", "a"), "", 0},
		{"unknown letter forged", nonce, body("133;Z"), "", 1},
		{"CAN abort", nonce, strings.TrimSuffix(mark("133", "A"), "\a") + "\x18x", "x", 1},
		{"SUB abort", nonce, "\x1b]633;E;ls\x1ax", "x", 1},
		{"ESC ends", nonce, strings.TrimSuffix(mark("133", "A"), "\a") + "\x1b[31mred", "\x1b[31mred", 1},
		{"ESC ends empty", nonce, "\x1b]133\x1b[0m", "\x1b[0m", 1},
		{"ESC ends before mark", nonce, "\x1b]133;D;0\x1b]133;D;1\a", "", 2},
		{"between text", nonce, "a" + body("133;A") + "b" + body("633;P;Cwd=/") + "c", "abc", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := term.NewParser(tt.nonce)
			got := feed(p, []byte(tt.in))
			var want []item
			if tt.want != "" {
				want = []item{data(tt.want)}
			}
			checkItems(t, got, want)
			if p.Forged() != tt.forged {
				t.Errorf("Forged() = %d, want %d", p.Forged(), tt.forged)
			}
		})
	}
}

// A program that prints a bare mark while a command runs must not be able
// to end the command.
func TestParserProgramCannotEndCommand(t *testing.T) {
	p := term.NewParser(nonce)
	in := mark("133", "C") + "working\r\n\x1b]133;D;0\a\x1b]133;A\a$ \x1b]133;B\a" +
		"\x1b]633;E;id;n=\x07more\r\n" + mark("133", "D", "2")
	checkItems(t, feed(p, []byte(in)), []item{
		kind(term.CommandStart), data("working\r\n$ more\r\n"), exit(2),
	})
	if p.Forged() != 4 {
		t.Errorf("Forged() = %d, want 4", p.Forged())
	}
}

func TestParserPassThrough(t *testing.T) {
	for _, in := range []string{
		"plain text\r\n",
		"\x1b]0;my title\a",
		"\x1b]2;title\x1b\\",
		"\x1b]1337;SetMark\a",
		"\x1b]13;x\a",
		"\x1b]1330;x\a",
		"\x1b]6;x\a",
		"\x1b]63;x\a",
		"\x1b]7;file:///tmp\a",
		"\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\",
		"\x1b[01;34mdir\x1b[0m \x1b[2J\x1b[H\x1b(B\x1b=",
		"\x1bP1$r0m\x1b\\",
		"\x1b\x1b\x1bx",
		"\x1b]\x1b]1\x1b]13\x1b]x",
		"héllo ✓ \xff\xfe \x9d133;D;0\a",
		"\x18\x1a\x07\x00",
	} {
		p := term.NewParser(nonce)
		checkItems(t, feed(p, []byte(in)), []item{data(in)})
		if p.Forged() != 0 {
			t.Errorf("%q: Forged() = %d", in, p.Forged())
		}
	}
}

// Bytes that cannot begin a mark are passed on by the Feed call that
// brought them, never held for a later one.
func TestParserNoDelay(t *testing.T) {
	tests := []struct {
		chunks []string
		want   []string // display passed on by each call
	}{
		{[]string{"abc", "def"}, []string{"abc", "def"}},
		{[]string{"x\x1b", "[31m"}, []string{"x", "\x1b[31m"}},
		{[]string{"x\x1b]", "0;t\a"}, []string{"x", "\x1b]0;t\a"}},
		{[]string{"\x1b]13", "2"}, []string{"", "\x1b]132"}},
		{[]string{"\x1b]633", "1"}, []string{"", "\x1b]6331"}},
		{[]string{"\x1b]6", "3", "3", ";E", "\a"}, []string{"", "", "", "", ""}},
		{[]string{"a\x1b]0;t\a\x1b", "x"}, []string{"a\x1b]0;t\a", "\x1bx"}},
		{[]string{"\x1b[", "1m"}, []string{"\x1b[", "1m"}},
	}
	for _, tt := range tests {
		p := term.NewParser(nonce)
		for i, c := range tt.chunks {
			var got []byte
			p.Feed([]byte(c), func(it term.Item) { got = append(got, it.Data...) })
			if string(got) != tt.want[i] {
				t.Errorf("%q: call %d passed on %q, want %q", tt.chunks, i, got, tt.want[i])
			}
		}
	}
}

// splitInputs are streams whose parse must not depend on how they are
// split into Feed calls.
var splitInputs = []string{
	mark("133", "A") + "$ " + mark("133", "B") + "ls" + mark("633", "E", "ls") + mark("133", "C") +
		"\x1b[01;34mdir\x1b[0m\r\n" + mark("133", "D", "0") + mark("633", "P", "Cwd=/home/u"),
	"title \x1b]0;t\a then forged \x1b]133;D;0\a and ST " +
		strings.TrimSuffix(mark("133", "D", "3"), "\a") + "\x1b\\ end",
	"\x1b\x1b]133;A;n=" + nonce + "\x1b\x1b]1337;x\a\x1b]63\x1b]633;X;a;b=c;n=" + nonce + "\a",
	"\x1b]133;C;n=" + nonce + "\x18after\x1b]633\x07\x1b]133\x1b\\x",
	mark("633", "X", "exec", "id=1", "rc") + "\x1b]133;" + strings.Repeat("z", 300) + "\x1a",
}

func TestParserSplit(t *testing.T) {
	for _, in := range splitInputs {
		b := []byte(in)
		whole := term.NewParser(nonce)
		want := feed(whole, b)

		var bytewise [][]byte
		for i := range b {
			bytewise = append(bytewise, b[i:i+1])
		}
		p := term.NewParser(nonce)
		checkItems(t, feed(p, bytewise...), want)
		if p.Forged() != whole.Forged() {
			t.Errorf("%q: byte-wise Forged() = %d, whole %d", in, p.Forged(), whole.Forged())
		}

		for i := 0; i <= len(b); i++ {
			for j := i; j <= len(b); j += 7 {
				p := term.NewParser(nonce)
				got := feed(p, b[:i], b[i:j], b[j:])
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%q split at %d,%d:\n got %v\nwant %v", in, i, j, got, want)
				}
			}
		}
	}
}

func TestParserOversized(t *testing.T) {
	huge := strings.Repeat("a", 1<<20+1)
	for _, tt := range []struct {
		name string
		in   string
	}{
		{"BEL", "x\x1b]133;" + huge + "\ay"},
		{"ST", "x\x1b]633;E;" + huge + "\x1b\\y"},
		{"nonce at end", "x\x1b]133;D;" + huge + ";n=" + nonce + "\ay"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in + mark("133", "A")
			want := []item{data("xy"), kind(term.PromptStart)}
			for _, size := range []int{len(in), 4096, 1 << 20} {
				p := term.NewParser(nonce)
				var chunks [][]byte
				for b := []byte(in); len(b) > 0; {
					n := min(size, len(b))
					chunks, b = append(chunks, b[:n]), b[n:]
				}
				checkItems(t, feed(p, chunks...), want)
				if p.Forged() != 1 {
					t.Errorf("chunk %d: Forged() = %d, want 1", size, p.Forged())
				}
			}
		})
	}

	// A mark of exactly the limit is still parsed.
	p := term.NewParser(nonce)
	tail := ";n=" + nonce
	in := "\x1b]633;X;" + strings.Repeat("b", 1<<20-len("X;")-len(tail)) + tail + "\a"
	got := feed(p, []byte(in))
	if len(got) != 1 || got[0].Event == nil || got[0].Event.Kind != term.Private {
		t.Errorf("mark at the limit: got %d items, want one Private event", len(got))
	}

	// An unterminated oversized mark ends at the next mark's ESC.
	p = term.NewParser(nonce)
	checkItems(t, feed(p, []byte("\x1b]133;"+huge+mark("133", "B"))), []item{kind(term.InputStart)})
}

func TestKindString(t *testing.T) {
	for k, want := range map[term.Kind]string{
		term.PromptStart:  "PromptStart",
		term.InputStart:   "InputStart",
		term.CommandStart: "CommandStart",
		term.CommandEnd:   "CommandEnd",
		term.CommandLine:  "CommandLine",
		term.Cwd:          "Cwd",
		term.Private:      "Private",
		0:                 "Kind(0)",
		99:                "Kind(99)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", int(k), got, want)
		}
	}
}

func TestMark(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{string(term.Mark("abc", "133", "D", "3")), "\x1b]133;D;3;n=abc\a"},
		{string(term.Mark("abc", "133", "A")), "\x1b]133;A;n=abc\a"},
		{string(term.Mark("abc")), "\x1b]n=abc\a"},
	} {
		if tt.got != tt.want {
			t.Errorf("Mark = %q, want %q", tt.got, tt.want)
		}
	}
}

func TestEscape(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"", ""},
		{"ls -la", "ls -la"},
		{`a\b`, `a\\b`},
		{"a;b", `a\x3bb`},
		{"\x00\x1b\x07\n\x7f", `\x00\x1b\x07\x0a\x7f`},
		{"héllo ✓ \xff", "héllo ✓ \xff"},
		{`x=1 \x3b`, `x=1 \\x3b`},
	} {
		got := term.Escape(tt.in)
		if got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := term.Unescape(got)
		if err != nil || back != tt.in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", got, back, err, tt.in)
		}
	}
}

func TestUnescape(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{`\x41\x4A\x4a`, "AJJ", true},
		{`\\\\`, `\\`, true},
		{"✓", "✓", true},
		{`\`, "", false},
		{`a\`, "", false},
		{`\x`, "", false},
		{`\x4`, "", false},
		{`\xg0`, "", false},
		{`\q`, "", false},
		{"a;b\n\x7f", "a;b\n\x7f", true},
		{`\\` + "\x00", "\\\x00", true},
	} {
		got, err := term.Unescape(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Unescape(%q) = %q, %v; want %q, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func BenchmarkParserFeed(b *testing.B) {
	// Colored ls-like output with an occasional title OSC and no marks.
	var buf bytes.Buffer
	for i := 0; buf.Len() < 1<<20; i++ {
		fmt.Fprintf(&buf, "\x1b[01;34mdir%d\x1b[0m  file-%d.txt  \x1b[01;32mrun.sh\x1b[0m  héllo\r\n", i, i)
		if i%100 == 0 {
			buf.WriteString("\x1b]0;title\a")
		}
	}
	in := buf.Bytes()
	const chunk = 32 << 10
	p := term.NewParser(nonce)
	var n int
	fn := func(it term.Item) { n += len(it.Data) }
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for b.Loop() {
		for c := in; len(c) > 0; {
			k := min(chunk, len(c))
			p.Feed(c[:k], fn)
			c = c[k:]
		}
	}
	if n == 0 {
		b.Fatal("no output")
	}
}
