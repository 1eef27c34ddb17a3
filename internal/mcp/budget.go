package mcp

import (
	"encoding/base64"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
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
// A stream that fits goes inline whole; one that does not gets its exact
// head and a tail at least as long, its size, and a resource. No marker
// text is ever put inside the output.
type plan struct {
	s     *Server
	c     session.Caller
	limit int // the budget of all inline output; 0 means none
	slots []*slot
}

// slot is one stream waiting for its share of the budget.
type slot struct {
	r    reply
	id   string
	name string
	f    capture
	size int64
	body []byte // the whole stream, read when it might fit
	need int    // JSON cost of the whole stream inline
	give int    // its share of the budget
}

func (s *Server) plan(c session.Caller) *plan {
	return &plan{s: s, c: c, limit: s.deps.InlineOutputBytes}
}

// add puts stream name of command id into r when fill runs.
func (p *plan) add(r reply, id, name string, f capture) {
	p.slots = append(p.slots, &slot{r: r, id: id, name: name, f: f})
}

// fill shares the budget and writes every stream into its reply. Streams
// that fit whole are served smallest first; the rest split what is left
// evenly, so one flood cannot starve a short error message.
func (p *plan) fill() {
	limit := p.limit
	for _, sl := range p.slots {
		sl.size = sl.f.Size()
		if limit <= 0 || sl.size <= int64(limit) {
			sl.body = readRange(sl.f, 0, sl.size)
			sl.need = inlineCost(sl.body)
		} else {
			sl.need = int(min(sl.size, 1<<40)) // cannot fit: its raw size alone is over the budget
		}
	}
	if limit > 0 {
		share(p.slots, limit)
	}
	for _, sl := range p.slots {
		p.s.reportLoss(sl)
		if limit <= 0 || sl.give >= sl.need {
			putText(sl.r, sl.name, sl.body)
			continue
		}
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
// share: first the tail (half the share), then a head no longer than the
// tail, so the end of the output, where errors are, is never the shorter.
func (p *plan) cut(sl *slot) {
	r, name := sl.r, sl.name
	tailBudget := sl.give - sl.give/2
	tail, tailEnc := lastBytes(sl.f, sl.size, tailBudget)
	headMax := min(int64(len(tail)), sl.size-int64(len(tail)))
	head, headEnc := firstBytes(sl.f, headMax, sl.give-encodedLen(tail, tailEnc))
	put(r, name, head, headEnc)
	put(r, name+"Tail", tail, tailEnc)
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
	}
}

// firstBytes is the longest prefix of the stream, at most max bytes, whose
// JSON form fits budget; text when it is UTF-8, else base64.
func firstBytes(f capture, max int64, budget int) ([]byte, bool) {
	if budget <= 0 || max <= 0 {
		return nil, false
	}
	b := readRange(f, 0, min(max, int64(budget)))
	n := fitPrefix(b, budget)
	n = utf8Cut(b, n)
	if utf8.Valid(b[:n]) {
		return b[:n], false
	}
	return b[:min(len(b), budget/4*3)], true
}

// lastBytes is the shortest-start suffix of the stream whose JSON form
// fits budget, starting on a rune; text when it is UTF-8, else base64.
func lastBytes(f capture, size int64, budget int) ([]byte, bool) {
	if budget <= 0 || size <= 0 {
		return nil, false
	}
	n := min(size, int64(budget))
	b := readRange(f, size-n, n)
	st := fitSuffix(b, budget)
	for st < len(b) && !utf8.RuneStart(b[st]) {
		st++
	}
	if utf8.Valid(b[st:]) {
		return b[st:], false
	}
	return b[max(0, len(b)-budget/4*3):], true
}

func put(r reply, name string, b []byte, b64 bool) {
	if b64 {
		r[name] = base64.StdEncoding.EncodeToString(b)
		r[name+"Encoding"] = "base64"
		return
	}
	r[name] = string(b)
}

// putText sets r[name] to a whole stream, base64 with name+"Encoding" when
// the bytes are not UTF-8, so the agent gets them exactly.
func putText(r reply, name string, b []byte) { put(r, name, b, !utf8.Valid(b)) }

func encodedLen(b []byte, b64 bool) int {
	if b64 {
		return base64.StdEncoding.EncodedLen(len(b))
	}
	return jsonCost(b)
}

// inlineCost is what a whole stream costs inline, as text or as base64.
func inlineCost(b []byte) int {
	return encodedLen(b, !utf8.Valid(b))
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

// byteCosts is the length each byte of b adds to its JSON string form as
// encoding/json writes it (HTML-safe): a U+2028 or U+2029 becomes a
// six-byte escape, counted on its first byte.
func byteCosts(b []byte) []int {
	c := make([]int, len(b))
	for i := 0; i < len(b); i++ {
		switch x := b[i]; {
		case x == '"' || x == '\\' || x == '\n' || x == '\r' || x == '\t':
			c[i] = 2
		case x < 0x20 || x == '<' || x == '>' || x == '&':
			c[i] = 6
		case x == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			c[i] = 6
			i += 2 // the other two bytes cost nothing more
		default:
			c[i] = 1
		}
	}
	return c
}

// jsonCost is the length of b's JSON string form, without the quotes.
func jsonCost(b []byte) int {
	n := 0
	for _, c := range byteCosts(b) {
		n += c
	}
	return n
}

// fitPrefix is the largest n with jsonCost(b[:n]) <= budget.
func fitPrefix(b []byte, budget int) int {
	costs, used := byteCosts(b), 0
	for i, c := range costs {
		if used+c > budget {
			return i
		}
		used += c
	}
	return len(b)
}

// fitSuffix is the smallest start with jsonCost(b[start:]) <= budget.
func fitSuffix(b []byte, budget int) int {
	costs, used := byteCosts(b), 0
	for i := len(b) - 1; i >= 0; i-- {
		if used+costs[i] > budget {
			return i + 1
		}
		used += costs[i]
	}
	return 0
}

// utf8Cut returns the largest n <= max that does not split a UTF-8 rune.
func utf8Cut(b []byte, max int) int {
	if max >= len(b) {
		return len(b)
	}
	n := max
	for n > 0 && n > max-utf8.UTFMax && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}
