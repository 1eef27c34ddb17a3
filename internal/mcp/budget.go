package mcp

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/spool"
)

// capture is what a reply needs of one captured output stream (a spool
// file): its size, its bytes, a path to serve all of it from, and what was
// lost writing it.
type capture interface {
	Size() int64
	ReadAt(p []byte, off int64) (int, error)
	Persist() (string, error)
	Lost() int64
	Err() error
}

// plan lays out every output stream of one reply under one budget: the
// JSON size of all inline output together stays within InlineOutputBytes.
// A stream whose text (render) fits goes inline whole; one that does not
// gets a head and a tail at least as long, cut on line boundaries, its
// size, and a resource. No marker text is ever put inside the output.
type plan struct {
	s     *Server
	c     session.Caller
	limit int // the budget of all inline output; 0 means none
	slots []*slot
}

// slot is one stream waiting for its share of the budget.
type slot struct {
	r     reply
	id    string
	name  string
	f     capture
	size  int64
	whole *piece // the whole stream as sent, when it might fit
	need  int    // JSON cost of the whole stream inline
	give  int    // its share of the budget
	head  piece  // when cut
	tail  piece
}

// frameScanMax is the largest stream read whole, beyond the budget, to see
// whether it fits once its progress redraws are collapsed.
const frameScanMax = 4 << 20

func (s *Server) plan(c session.Caller) *plan {
	return &plan{s: s, c: c, limit: s.deps.InlineOutputBytes}
}

// add puts stream name of command id into r when fill runs.
func (p *plan) add(r reply, id, name string, f capture) {
	p.slots = append(p.slots, &slot{r: r, id: id, name: name, f: f})
}

// fill shares the budget and writes every stream into its reply. Streams
// that fit whole are served smallest first; the rest split what is left
// evenly, so one flood cannot starve a short error message. Whether a
// stream fits is decided on what would be sent: a progress bar of a
// megabyte may fit once its redraws are dropped.
func (p *plan) fill() {
	limit := p.limit
	for _, sl := range p.slots {
		sl.size = sl.f.Size()
		switch {
		case limit <= 0 || sl.size <= int64(limit),
			sl.size <= frameScanMax && hasFrames(sl.f, sl.size):
			w := render(readRange(sl.f, 0, sl.size))
			sl.whole, sl.need = &w, w.cost
		default:
			sl.need = int(min(sl.size, 1<<40)) // cannot fit: its text is no shorter than its size
		}
	}
	if limit > 0 {
		share(p.slots, limit)
	}
	for _, sl := range p.slots {
		p.s.reportLoss(sl)
		if sl.whole != nil && (limit <= 0 || sl.give >= sl.need) {
			sl.whole.put(sl.r, sl.name)
			continue
		}
		sl.whole = nil
		p.cut(sl)
	}
}

// share is water-filling: each stream gets what it needs or an even share
// of what is left, whichever is smaller.
func share(slots []*slot, budget int) {
	order := append([]*slot(nil), slots...)
	sort.SliceStable(order, func(i, j int) bool { return order[i].need < order[j].need })
	left := budget
	for i, sl := range order {
		even := left / (len(order) - i)
		sl.give = min(sl.need, even)
		left -= sl.give
	}
}

// cut puts the head and tail of a stream that does not fit into its
// share: first the tail (half the share), then a head of no more of the
// stream's bytes than the tail, so the end of the output, where errors
// are, is never the shorter. Each is rendered on its own; collapsing
// redraws only ever shortens one.
func (p *plan) cut(sl *slot) {
	r, name := sl.r, sl.name
	sl.tail = lastPiece(sl.f, sl.size, sl.give-sl.give/2)
	headMax := min(int64(sl.tail.raw), sl.size-int64(sl.tail.raw))
	sl.head = firstPiece(sl.f, headMax, sl.give-sl.tail.cost)
	sl.head.put(r, name)
	sl.tail.put(r, name+"Tail")
	r[name+"Bytes"] = sl.size
	r[name+"Truncated"] = true
	path, err := sl.f.Persist()
	if err != nil {
		p.s.log.Error("spool output", "command", sl.id, "err", err)
		if _, said := r[name+"Error"]; !said {
			r[name+"Error"] = "the full output could not be kept: " + err.Error()
		}
		return
	}
	uri := p.s.outputs.add(p.c, sl.id, name, path, sl.size)
	r[name+"Resource"] = reply{
		"uri": uri, "bytes": sl.size, "pageBytes": pageBytes,
		"pages": (sl.size + pageBytes - 1) / pageBytes,
	}
}

// reportLoss says in the reply how much of a stream a full disk cost.
func (s *Server) reportLoss(sl *slot) {
	if lost := sl.f.Lost(); lost > 0 {
		s.log.Error("output lost", "command", sl.id, "stream", sl.name, "bytes", lost, "err", sl.f.Err())
		sl.r[sl.name+"Error"] = fmt.Sprintf("%d bytes of %s after the first %d were lost: %v. Free space under tandem's data directory and run the command again.", lost, sl.name, sl.size, sl.f.Err())
		if errors.Is(sl.f.Err(), spool.ErrLimit) {
			sl.r[sl.name+"Error"] = fmt.Sprintf("%d bytes of %s after the first %d were not kept: one stream keeps at most half of limits.keptOutputBytes. Send such output to a file in the session (cmd > out.log) and read it in parts.", lost, sl.name, sl.size)
		}
	}
}

// firstPiece is the stream's longest head, of at most max bytes, whose
// text fits budget, ending after a line when one ends near the cut;
// base64 when those bytes are mostly binary.
func firstPiece(f capture, max int64, budget int) piece {
	if budget <= 0 || max <= 0 {
		return piece{}
	}
	// Every byte costs at least one, so no more than budget bytes fit.
	b := readRange(f, 0, min(max, int64(budget)))
	if mostlyBinary(b) {
		return binaryPiece(b[:min(len(b), budget/4*3)])
	}
	n := fitPrefix(b, budget)
	n = snapHead(b, wholeRunes(b, n))
	return textPiece(b[:n])
}

// lastPiece is the stream's shortest tail whose text fits budget,
// starting on a character, and after a line end when one is near the
// cut; base64 when those bytes are mostly binary.
func lastPiece(f capture, size int64, budget int) piece {
	if budget <= 0 || size <= 0 {
		return piece{}
	}
	n := min(size, int64(budget))
	before := min(size-n, 1) // and the byte before, to know if the tail starts a line
	w := readRange(f, size-n-before, n+before)
	if int64(len(w)) < before {
		return piece{}
	}
	b := w[before:]
	if mostlyBinary(b) {
		return binaryPiece(b[max(0, len(b)-budget/4*3):])
	}
	st := fitSuffix(b, budget)
	for k := 0; k < utf8.UTFMax-1 && st < len(b) && !utf8.RuneStart(b[st]); k++ {
		st++
	}
	st = snapTail(b, st, before == 0 || w[0] == '\n')
	return textPiece(b[st:])
}

// readRange reads n bytes at off; a stream that shrank or failed reads
// short.
func readRange(f capture, off, n int64) []byte {
	if n <= 0 {
		return nil
	}
	b := make([]byte, n)
	k, err := f.ReadAt(b, off)
	if err != nil && err != io.EOF {
		k = max(k, 0)
	}
	return b[:k]
}

// byteCosts is the length each byte of b adds to the JSON string of its
// text (validText) as encoding/json writes it (HTML-safe): a byte that is
// not valid UTF-8 becomes U+FFFD, three bytes; a U+2028 or U+2029 becomes
// a six-byte escape, counted on its first byte. A cost fits a byte: the
// slice is an eighth of what []int would take, for a window of the budget.
func byteCosts(b []byte) []uint8 {
	c := make([]uint8, len(b))
	for i := 0; i < len(b); {
		x := b[i]
		if x < utf8.RuneSelf {
			c[i] = asciiCost(x)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			c[i] = 3
		case r == '\u2028' || r == '\u2029':
			c[i] = 6 // the other two bytes cost nothing more
		default:
			for k := range n {
				c[i+k] = 1
			}
		}
		i += n
	}
	return c
}

// asciiCost is the JSON length of one ASCII byte.
func asciiCost(x byte) uint8 {
	switch {
	case x == '"' || x == '\\' || x == '\n' || x == '\r' || x == '\t':
		return 2
	case x < 0x20 || x == '<' || x == '>' || x == '&':
		return 6
	}
	return 1
}

// jsonCost is the length of text's JSON string form, without the quotes;
// text is valid UTF-8.
func jsonCost(text []byte) int {
	n := 0
	for i := 0; i < len(text); i++ {
		x := text[i]
		switch {
		case x < utf8.RuneSelf:
			n += int(asciiCost(x))
		case x == 0xE2 && i+2 < len(text) && text[i+1] == 0x80 && (text[i+2] == 0xA8 || text[i+2] == 0xA9):
			n += 6
			i += 2
		default:
			n++
		}
	}
	return n
}

// fitPrefix is the largest n whose text b[:n] costs at most budget.
func fitPrefix(b []byte, budget int) int {
	costs, used := byteCosts(b), 0
	for i, c := range costs {
		if used+int(c) > budget {
			return i
		}
		used += int(c)
	}
	return len(b)
}

// fitSuffix is the smallest start whose text b[start:] costs at most
// budget.
func fitSuffix(b []byte, budget int) int {
	costs, used := byteCosts(b), 0
	for i := len(b) - 1; i >= 0; i-- {
		if used+int(costs[i]) > budget {
			return i + 1
		}
		used += int(costs[i])
	}
	return 0
}

// wholeRunes returns n, or less so that b[:n] does not end in the first
// bytes of a character whose rest lies beyond n: cut there, they would
// show as U+FFFD.
func wholeRunes(b []byte, n int) int {
	for k := 1; k < utf8.UTFMax && k <= n; k++ {
		c := b[n-k]
		if c < utf8.RuneSelf {
			return n
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[n-k : n]) {
				return n
			}
			return n - k
		}
	}
	return n
}
