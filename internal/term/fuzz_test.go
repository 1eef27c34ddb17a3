package term_test

import (
	"bytes"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/term"
)

func FuzzParser(f *testing.F) {
	for _, s := range splitInputs {
		f.Add([]byte(s), uint(len(s)/2))
	}
	for _, s := range []string{
		"",
		"plain",
		"\x1b]133;D;0\a",
		"\x1b]0;title\a",
		mark("133", "D", "0"),
		mark("633", "E", `a\x3bb`),
		mark("633", "X", "n", "k=v", "f"),
		strings.TrimSuffix(mark("133", "A"), "\a") + "\x1b\\",
		strings.TrimSuffix(mark("133", "A"), "\a") + "\x18",
		"\x1b]133\a\x1b]633\x1b\\",
	} {
		f.Add([]byte(s), uint(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint) {
		at := int(split % uint(len(in)+1))
		whole := term.NewParser(nonce)
		want := feed(whole, in)
		p := term.NewParser(nonce)
		got := feed(p, in[:at], in[at:])
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split at %d:\n got %v\nwant %v", at, got, want)
		}
		if p.Forged() != whole.Forged() {
			t.Fatalf("split at %d: Forged() = %d, whole %d", at, p.Forged(), whole.Forged())
		}

		if len(in) < 1<<20 {
			model, forged := refParse(in, nonce)
			if !reflect.DeepEqual(want, model) || whole.Forged() != forged {
				t.Fatalf("parser and model differ:\n got %v (forged %d)\nwant %v (forged %d)",
					want, whole.Forged(), model, forged)
			}
		}

		var display []byte
		events := 0
		for _, it := range want {
			display = append(display, it.Data...)
			if it.Event != nil {
				events++
			}
		}
		if events > 0 && !bytes.Contains(in, []byte(nonce)) {
			t.Fatalf("event from input without the nonce: %v", want)
		}
		if len(display) > len(in) {
			t.Fatalf("display longer than input")
		}
		// With no nonce nothing is trusted, and the display is the same.
		untrusting := term.NewParser("")
		u := feed(untrusting, in)
		var udisplay []byte
		for _, it := range u {
			if it.Event != nil {
				t.Fatalf("event with empty nonce: %v", it)
			}
			udisplay = append(udisplay, it.Data...)
		}
		if !bytes.Equal(udisplay, display) {
			t.Fatalf("display depends on nonce:\n%q\n%q", udisplay, display)
		}
		if untrusting.Forged() < whole.Forged() {
			t.Fatalf("empty nonce forged %d < %d", untrusting.Forged(), whole.Forged())
		}
	})
}

func FuzzUnescape(f *testing.F) {
	for _, s := range []string{"", "ls -la", `a\b;c`, "\x00\x1b\x7f\n", "héllo ✓", `\x41`, `\`, `\xzz`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := term.Escape(s)
		if strings.ContainsAny(e, ";\a\x1b\x18\x1a\x7f") {
			t.Fatalf("Escape(%q) = %q holds a byte that must be escaped", s, e)
		}
		back, err := term.Unescape(e)
		if err != nil || back != s {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", s, back, err)
		}
		// Unescape of anything must not panic, and what it accepts
		// escapes back to something it decodes the same.
		if u, err := term.Unescape(s); err == nil {
			if again, err := term.Unescape(term.Escape(u)); err != nil || again != u {
				t.Fatalf("round trip of Unescape(%q) = %q: %q, %v", s, u, again, err)
			}
		}
	})
}

func FuzzPlain(f *testing.F) {
	for _, tt := range plainTests {
		f.Add([]byte(tt.in), uint(len(tt.in)/2))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint) {
		at := int(split % uint(len(in)+1))
		want := term.StripString(string(in))
		var sb strings.Builder
		pl := term.NewPlain(&sb)
		pl.Write(in[:at])
		pl.Write(in[at:])
		pl.Flush()
		if sb.String() != want {
			t.Fatalf("split at %d: %q, want %q", at, sb.String(), want)
		}
		if len(want) > len(in) {
			t.Fatalf("output longer than input")
		}
		if strings.ContainsAny(want, "\x1b\a") {
			t.Fatalf("output %q holds ESC or BEL", want)
		}
	})
}

// refParse is a simple whole-input model of the parser, written
// independently of its state machine, for inputs whose marks stay under
// the size limit. It returns the items and the forged count; an
// unfinished mark or introducer at the end is left out, as Feed holds it.
func refParse(in []byte, nonce string) ([]item, int) {
	var out []item
	forged := 0
	display := func(b []byte) {
		if n := len(out); n > 0 && out[n-1].Event == nil {
			out[n-1].Data += string(b)
		} else if len(b) > 0 {
			out = append(out, item{Data: string(b)})
		}
	}
	for i := 0; i < len(in); {
		j := bytes.IndexByte(in[i:], 0x1b)
		if j < 0 {
			display(in[i:])
			break
		}
		display(in[i : i+j])
		i += j
		rest := in[i:]
		intro := ""
		for _, s := range []string{"\x1b]133", "\x1b]633"} {
			if bytes.HasPrefix(rest, []byte(s)) {
				intro = s
			} else if len(rest) < len(s) && bytes.HasPrefix([]byte(s), rest) {
				return out, forged // could still become a mark
			}
		}
		if intro == "" || len(rest) == len(intro) {
			if intro != "" {
				return out, forged
			}
			display(rest[:1])
			i++
			continue
		}
		body := rest[len(intro):]
		switch body[0] {
		case ';':
			body = body[1:]
		case 0x07, 0x18, 0x1a, 0x1b:
		default:
			display(rest[:1])
			i++
			continue
		}
		k := bytes.IndexAny(body, "\x07\x18\x1a\x1b")
		if k < 0 || body[k] == 0x1b && k+1 == len(body) {
			return out, forged
		}
		end := len(rest) - len(body) + k // index in rest of the terminator
		switch {
		case body[k] == 0x07:
			i += end + 1
		case body[k] == 0x1b && body[k+1] == '\\':
			i += end + 2
		case body[k] == 0x1b:
			forged++
			i += end // the ESC starts over
			continue
		default: // CAN, SUB
			forged++
			i += end + 1
			continue
		}
		ev, ok := refEvent(intro[2:], string(body[:k]), nonce)
		if !ok {
			forged++
		} else if ev != nil {
			out = append(out, item{Event: ev})
		}
	}
	return out, forged
}

// refEvent decodes the payload of a complete 133 or 633 mark.
func refEvent(code, body, nonce string) (*term.Event, bool) {
	f := strings.Split(body, ";")
	if nonce == "" || len(f) < 2 || f[len(f)-1] != "n="+nonce {
		return nil, false
	}
	f = f[:len(f)-1]
	mark, args := code+";"+f[0], f[1:]
	bad := false
	unesc := func(s string) string {
		u, err := term.Unescape(s)
		bad = bad || err != nil
		return u
	}
	var ev *term.Event
	switch {
	case mark == "133;A" && len(args) == 0:
		ev = &term.Event{Kind: term.PromptStart}
	case mark == "133;B" && len(args) == 0:
		ev = &term.Event{Kind: term.InputStart}
	case mark == "133;C" && len(args) == 0:
		ev = &term.Event{Kind: term.CommandStart}
	case mark == "133;D" && len(args) <= 1:
		ev = &term.Event{Kind: term.CommandEnd}
		if len(args) == 1 {
			n, err := strconv.Atoi(args[0])
			ev.Exit, ev.HasExit = n, err == nil
			if err != nil {
				ev.Exit = 0
			}
		}
	case mark == "633;E" && len(args) == 1:
		ev = &term.Event{Kind: term.CommandLine, Text: unesc(args[0])}
	case mark == "633;P" && len(args) == 1 && strings.HasPrefix(args[0], "Cwd="):
		ev = &term.Event{Kind: term.Cwd, Text: unesc(args[0][4:])}
	case mark == "633;X" && len(args) >= 1 && args[0] != "":
		ev = &term.Event{Kind: term.Private, Text: unesc(args[0])}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			if ev.Fields == nil {
				ev.Fields = map[string]string{}
			}
			ev.Fields[unesc(k)] = unesc(v)
		}
	case slices.Contains([]string{"133;A", "133;B", "133;C", "133;D", "633;E", "633;P", "633;X"}, mark):
		return nil, false // known mark, wrong arguments
	default:
		return nil, true // unknown letter: dropped silently
	}
	if bad {
		return nil, false
	}
	return ev, true
}

func TestParserModel(t *testing.T) {
	for _, in := range splitInputs {
		p := term.NewParser(nonce)
		got := feed(p, []byte(in))
		want, forged := refParse([]byte(in), nonce)
		checkItems(t, got, want)
		if p.Forged() != forged {
			t.Errorf("%q: Forged() = %d, model %d", in, p.Forged(), forged)
		}
	}
}
