package mcp

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// grepAll runs grep on b as one ssh_read_output call would.
func grepAll(t testing.TB, b []byte, pattern string, off int64, ctxLines, budget int) reply {
	t.Helper()
	r := reply{"commandId": "cmd_x", "stream": "stdout", "totalBytes": int64(len(b)), "running": false}
	q := grepQuery{f: memCapture{b}, total: int64(len(b)), off: off, re: regexp.MustCompile(pattern), context: ctxLines, budget: budget}
	if err := grep(context.Background(), r, q, true); err != nil {
		t.Fatal(err)
	}
	return ok(r)
}

// summary is a grep reply's lines as "n:text" for matches and "n-text"
// for context lines, space-separated.
func summary(r reply) string {
	var s []string
	for _, m := range r["matches"].([]any) {
		e := m.(reply)
		sep := "-"
		if e["match"] == true {
			sep = ":"
		}
		s = append(s, fmt.Sprint(e["line"], sep, e["text"]))
	}
	return strings.Join(s, " ")
}

func TestGrep(t *testing.T) {
	lines := func(n int) []byte {
		var b bytes.Buffer
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "l%d\n", i)
		}
		return b.Bytes()
	}
	tests := []struct {
		name    string
		in      []byte
		pattern string
		off     int64
		context int
		want    string
	}{
		{"plain", lines(20), `^l1[02]$`, 0, 0, "10:l10 12:l12"},
		{"crlf and no final line end", []byte("a\r\nb\r\na"), `a$`, 0, 0, "1:a 3:a"},
		{"empty stream", nil, `x`, 0, 0, ""},
		{"empty lines", []byte("\n\nx\n"), `^$`, 0, 0, "1: 2:"},
		{"context merges", lines(20), `^l(5|7)$`, 0, 2, "3-l3 4-l4 5:l5 6-l6 7:l7 8-l8 9-l9"},
		{"context at the ends", lines(5), `^l(1|5)$`, 0, 3, "1:l1 2-l2 3-l3 4-l4 5:l5"},
		{"a match in the context", lines(6), `^l[23]$`, 0, 1, "1-l1 2:l2 3:l3 4-l4"},
		{"from an offset", lines(9), `l`, 9, 0, "4:l4 5:l5 6:l6 7:l7 8:l8 9:l9"},
		{"context owed from before the offset", lines(9), `^l3$`, 9, 2, "4-l4 5-l5"},
		{"context before, from the offset only", lines(9), `^l5$`, 9, 3, "4-l4 5:l5 6-l6 7-l7 8-l8"},
		{"invalid bytes", []byte("caf\xe9\nok\n"), `caf`, 0, 0, "1:caf\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := grepAll(t, tc.in, tc.pattern, tc.off, tc.context, 1<<20)
			if got := summary(r); got != tc.want || r["eof"] != true || r["nextOffset"] != nil {
				t.Errorf("got %q, want %q (%v)", got, tc.want, r)
			}
		})
	}
}

// TestGrepLongLines: a line over 4 KiB comes as an excerpt around its
// first match, or its start as context, saying where it lies; a line over
// 16 MiB is searched in its first 16 MiB and noted.
func TestGrepLongLines(t *testing.T) {
	long := strings.Repeat("a", 10000) + "NEEDLE" + strings.Repeat("b", 10000)
	in := []byte("before " + strings.Repeat("x", 5000) + "\n" + long + "\n")
	r := grepAll(t, in, "NEEDLE", 0, 1, 1<<20)
	m := r["matches"].([]any)
	if len(m) != 2 {
		t.Fatalf("%v", r)
	}
	ctxLine, match := m[0].(reply), m[1].(reply)
	if ctxLine["excerpt"] != true || ctxLine["text"] != "before "+strings.Repeat("x", grepExcerpt-7) || ctxLine["match"] != nil || ctxLine["textOffset"] != int64(0) {
		t.Errorf("context line: %v", ctxLine["text"])
	}
	start := int64(5008)
	text := match["text"].(string)
	if match["matchOffset"] != start+10000 || match["lineBytes"] != int64(len(long)) || len(text) != grepExcerpt ||
		match["textOffset"] != start+10000-int64(strings.Index(text, "NEEDLE")) || strings.Index(text, "NEEDLE") != (grepExcerpt-6)/2 {
		t.Errorf("match: %v", match)
	}

	huge := append(bytes.Repeat([]byte("z"), grepScanMax+100), "NEEDLE\nNEEDLE\n"...)
	r = grepAll(t, huge, "NEEDLE", 0, 0, 1<<20)
	if summary(r) != "2:NEEDLE" || len(r["unsearched"].([]any)) != 1 || r["unsearched"].([]any)[0].(reply)["lineBytes"] != int64(grepScanMax+106) {
		t.Errorf("%s %v", summary(r), r["unsearched"])
	}
}

// TestExcerpt: an excerpt is at most grepExcerpt bytes, holds the match
// (or its start), and does not split a character.
func TestExcerpt(t *testing.T) {
	line := []byte(strings.Repeat("日本", 3000))
	tests := []struct{ ms, me int }{{0, 3}, {9000, 9003}, {len(line) - 3, len(line)}, {99, 99 + 5001}, {3, 3}}
	for _, tc := range tests {
		es, ee := excerpt(line, tc.ms, tc.me)
		if ee-es > grepExcerpt || es > tc.ms || ee < min(tc.me, tc.ms+grepExcerpt-3) || !bytes.Equal(bytes.ToValidUTF8(line[es:ee], nil), line[es:ee]) {
			t.Errorf("excerpt(%d, %d) = [%d, %d)", tc.ms, tc.me, es, ee)
		}
	}
}

// checkGrep greps b whole, then again within budget following nextOffset,
// and checks that both give the same lines, that every match matches and
// every context line is near one, and that each reply fits its budget.
func checkGrep(t testing.TB, b []byte, pattern string, ctxLines, budget int) {
	t.Helper()
	re := regexp.MustCompile(pattern)
	whole := grepAll(t, b, pattern, 0, ctxLines, 1<<30)
	matched := map[int]bool{}
	for _, m := range whole["matches"].([]any) {
		e := m.(reply)
		if e["match"] == true {
			matched[e["line"].(int)] = true
			if e["excerpt"] == nil && e["lossy"] == nil && !re.MatchString(e["text"].(string)) {
				t.Fatalf("line %v %q does not match %q", e["line"], e["text"], pattern)
			}
		}
	}
	for _, m := range whole["matches"].([]any) {
		n, near := m.(reply)["line"].(int), false
		for d := -ctxLines; d <= ctxLines; d++ {
			near = near || matched[n+d]
		}
		if !near {
			t.Fatalf("line %d is no match's context", n)
		}
	}
	var parts []string
	for off := int64(0); ; {
		r := grepAll(t, b, pattern, off, ctxLines, budget)
		j, _ := r.MarshalJSON()
		if n := len(r["matches"].([]any)); len(j) > budget && n > 1 {
			t.Fatalf("%d lines in %d bytes, over the budget of %d", n, len(j), budget)
		}
		if s := summary(r); s != "" {
			parts = append(parts, s)
		}
		next, more := r["nextOffset"].(int64)
		if !more {
			if r["eof"] != true {
				t.Fatalf("no nextOffset and no eof: %v", r)
			}
			break
		}
		if next <= off {
			t.Fatalf("no progress at %d", off)
		}
		off = next
	}
	if got, want := strings.Join(parts, " "), summary(whole); got != want {
		t.Fatalf("in parts:\n%s\nwhole:\n%s", got, want)
	}
}

func TestGrepInParts(t *testing.T) {
	var seq bytes.Buffer
	for i := 1; i <= 600; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	for _, ctxLines := range []int{0, 1, 3, 10} {
		for _, budget := range []int{1, 300, 1000, 32 << 10} {
			t.Run(fmt.Sprint(ctxLines, "/", budget), func(t *testing.T) {
				checkGrep(t, seq.Bytes(), `(^1|7$)`, ctxLines, budget)
			})
		}
	}
}

// FuzzGrep: whatever the stream, the pattern, the context and the budget,
// following nextOffset gives what one unbounded call gives, each reply in
// its budget.
func FuzzGrep(f *testing.F) {
	f.Add([]byte("a\nb\nab\n\nba\r\nx"), uint8(0), uint8(1), uint16(300))
	f.Add(bytes.Repeat([]byte("aab\n"), 200), uint8(2), uint8(3), uint16(400))
	f.Add([]byte("caf\xe9\n\xff\n"), uint8(3), uint8(0), uint16(1))
	patterns := []string{`a`, `^$`, `b$`, `a|\r`, `.`, `^b`, `x*`}
	f.Fuzz(func(t *testing.T, b []byte, pattern, ctxLines uint8, budget uint16) {
		// A small budget costs a call per line, each scanning from the
		// start: keep the stream short enough to fuzz quickly.
		b = b[:min(len(b), 2048)]
		checkGrep(t, b, patterns[int(pattern)%len(patterns)], int(ctxLines)%(grepContextMax+1), int(budget))
	})
}
