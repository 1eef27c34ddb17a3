package mcp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
	"unicode/utf8"
)

// Bounds of ssh_read_output's grep.
const (
	// grepLineMax is the longest line that comes whole; a longer one
	// comes as an excerpt.
	grepLineMax = 4 << 10
	// grepExcerpt is the most of a long line one excerpt shows.
	grepExcerpt = 2 << 10
	// grepScanMax is the most of one line grep searches.
	grepScanMax = 16 << 20
	// grepContextMax is the most context lines a match may ask for.
	grepContextMax = 10
)

const grepMore = "More lines may match: call again with offset set to nextOffset."

// grepQuery is one grep of a stream, for one reply.
type grepQuery struct {
	f       capture
	total   int64
	off     int64 // lines that start here or later are reported
	re      *regexp.Regexp
	context int // lines of context before and after each match
	budget  int // the JSON size of the whole reply
}

// grepLine is one line of the stream as the scan sees it.
type grepLine struct {
	n      int    // its number, from 1 at the start of the stream
	start  int64  // where it starts
	length int64  // its length without its line end ("\n" or "\r\n")
	text   []byte // its first grepScanMax bytes, without the line end
}

// linePos is a line already passed, to look back at.
type linePos struct {
	n             int
	start, length int64
}

// grepper is the state of one grep: the lines to send, the context
// lines held back until a match needs them, and the budget left.
type grepper struct {
	q          grepQuery
	used       int     // JSON bytes of the reply so far
	lines      []any   // the matches and their context
	unsearched []any   // lines longer than grepScanMax
	held       []reply // context lines before the next match, oldest first
	heldAt     []int64 // where each held line starts
	owed       int     // context lines still owed after the last match
	next       int64   // where to continue
	stopped    bool    // the budget ran out at next
}

// grep fills r with the lines of q's stream at or after q.off that match,
// each with the context lines around it, as "matches", within q.budget
// for all of r's JSON (one line always comes, so that every call makes
// progress); "nextOffset" says where to continue when the budget ran out.
func grep(ctx context.Context, r reply, q grepQuery, done bool) error {
	r["offset"], r["eof"], r["matches"] = q.off, false, []any{}
	r["nextOffset"], r["message"], r["success"] = q.total, grepMore, true
	base, err := r.MarshalJSON()
	if err != nil {
		return fmt.Errorf("grep: %w", err)
	}
	g := &grepper{q: q, used: len(base), next: q.total}
	if err := g.scan(ctx); err != nil {
		return err
	}
	delete(r, "success")
	r["matches"] = g.lines
	if len(g.unsearched) > 0 {
		r["unsearched"] = g.unsearched
	}
	if !g.stopped {
		delete(r, "nextOffset")
		delete(r, "message")
		r["eof"] = done
		return nil
	}
	r["nextOffset"] = g.next
	return nil
}

// scan reads the stream line by line, from its start, to number the
// lines; those before the offset are only counted, and the last few kept
// in mind for the context they may owe.
func (g *grepper) scan(ctx context.Context) error {
	q := g.q
	br := bufio.NewReaderSize(io.NewSectionReader(readerAt{q.f}, 0, q.total), int(min(max(q.total, 16), 64<<10)))
	var before []linePos // the last lines before q.off, for their context
	looked := false
	l := &grepLine{}
	for pos, n := int64(0), 1; pos < q.total; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return fmt.Errorf("grep: %w", ctx.Err())
		}
		size, err := l.read(br, n, pos)
		if err != nil {
			return fmt.Errorf("grep: %w", err)
		}
		if size == 0 {
			break // the stream shrank
		}
		pos += size
		if l.start < q.off {
			if q.context > 0 {
				before = append(before, linePos{l.n, l.start, l.length})
				if len(before) > q.context {
					before = before[1:]
				}
			}
			continue
		}
		if !looked {
			looked = true
			g.owed = g.lookBack(before, l.n)
		}
		if !g.line(l) {
			return nil
		}
	}
	return nil
}

// read reads line n, which starts at pos, and returns its size with its
// line end.
func (l *grepLine) read(br *bufio.Reader, n int, pos int64) (int64, error) {
	l.n, l.start, l.text = n, pos, l.text[:0]
	var size int64
	var last, prev byte
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if room := grepScanMax - len(l.text); room > 0 {
			l.text = append(l.text, chunk[:min(len(chunk), room)]...)
		}
		switch len(chunk) {
		case 0:
		case 1:
			prev, last = last, chunk[0]
		default:
			prev, last = chunk[len(chunk)-2], chunk[len(chunk)-1]
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil && err != io.EOF {
			return 0, err
		}
		break
	}
	l.length = size
	if size > 0 && last == '\n' {
		l.length--
		if size > 1 && prev == '\r' {
			l.length--
		}
	}
	l.text = l.text[:min(int64(len(l.text)), l.length)]
	return size, nil
}

// lookBack is how many context lines are still owed, at line first, to
// matches among the lines just before the offset: a call that continues
// at nextOffset shows what one call without a budget would have.
func (g *grepper) lookBack(before []linePos, first int) int {
	owed := 0
	for _, p := range before {
		if g.q.re.Match(readRange(g.q.f, p.start, min(p.length, grepScanMax))) {
			owed = max(owed, p.n+g.q.context-first+1)
		}
	}
	return owed
}

// line takes one line at or after the offset; false when the budget is
// spent.
func (g *grepper) line(l *grepLine) bool {
	notes := len(g.unsearched)
	if l.length > grepScanMax {
		note := reply{"line": l.n, "offset": l.start, "lineBytes": l.length}
		if !g.add(&g.unsearched, note, l.start, len(`,"unsearched":[]`)) {
			return false
		}
	}
	if !g.take(l) {
		g.unsearched = g.unsearched[:notes] // the next call notes it again
		return false
	}
	return true
}

// take sends, or holds back, one line at or after the offset; false when
// the budget is spent.
func (g *grepper) take(l *grepLine) bool {
	var loc []int
	if l.length > grepLineMax {
		loc = g.q.re.FindIndex(l.text)
	} else if g.q.re.Match(l.text) {
		loc = []int{0, 0}
	}
	switch {
	case loc != nil:
		for i, e := range g.held {
			if !g.add(&g.lines, e, g.heldAt[i], 0) {
				return false
			}
		}
		g.held, g.heldAt = g.held[:0], g.heldAt[:0]
		g.owed = g.q.context
		return g.add(&g.lines, lineEntry(l, loc), l.start, 0)
	case g.owed > 0:
		g.owed--
		return g.add(&g.lines, lineEntry(l, nil), l.start, 0)
	case g.q.context > 0:
		if len(g.held) == g.q.context {
			g.held, g.heldAt = g.held[1:], g.heldAt[1:]
		}
		g.held = append(g.held, lineEntry(l, nil))
		g.heldAt = append(g.heldAt, l.start)
	}
	return true
}

// add appends e to list when it fits the budget, or when nothing has been
// sent yet; otherwise the reply stops before the line at start. first is
// what the list's key costs, when the list is still empty.
func (g *grepper) add(list *[]any, e reply, start int64, first int) bool {
	b, err := e.MarshalJSON()
	cost := len(b) + 1
	if len(*list) == 0 {
		cost += first
	}
	if err != nil || (g.used+cost > g.q.budget && len(g.lines)+len(g.unsearched) > 0) {
		g.next, g.stopped = start, true
		return false
	}
	g.used += cost
	*list = append(*list, e)
	return true
}

// lineEntry is a line as a grep reply lists it. loc is where the pattern
// matched in it, nil for a context line. A line longer than grepLineMax
// comes as an excerpt: grepExcerpt bytes around its first match, or its
// first grepExcerpt bytes for a context line.
func lineEntry(l *grepLine, loc []int) reply {
	e := reply{"line": l.n, "offset": l.start}
	text := l.text
	if l.length > grepLineMax {
		es, ee := 0, wholeRunes(text, min(len(text), grepExcerpt))
		if loc != nil {
			es, ee = excerpt(text, loc[0], loc[1])
			e["matchOffset"] = l.start + int64(loc[0])
		}
		text = text[es:ee]
		e["excerpt"], e["lineBytes"], e["textOffset"] = true, l.length, l.start+int64(es)
	}
	t, replaced := validText(text)
	e["text"] = string(t)
	if replaced > 0 {
		e["lossy"] = true
	}
	if loc != nil {
		e["match"] = true
	}
	return e
}

// excerpt is the part of line, at most grepExcerpt bytes, around the
// match at [ms, me): centred on it, or its start when it is longer, and
// on whole characters.
func excerpt(line []byte, ms, me int) (int, int) {
	if me-ms >= grepExcerpt {
		return ms, max(ms, wholeRunes(line, ms+grepExcerpt))
	}
	pad := (grepExcerpt - (me - ms)) / 2
	es := max(0, ms-pad)
	ee := min(len(line), es+grepExcerpt)
	es = max(0, ee-grepExcerpt)
	for k := 0; k < utf8.UTFMax-1 && es < ms && !utf8.RuneStart(line[es]); k++ {
		es++
	}
	if ee > me {
		ee = max(me, wholeRunes(line, ee))
	}
	return es, ee
}

// readerAt adapts a capture for io.SectionReader.
type readerAt struct{ f capture }

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
