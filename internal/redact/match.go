package redact

import (
	"cmp"
	"math"
	"slices"
	"sort"
)

// The entropy rule: a run of token bytes is cut into chunks of at most
// maxEntropyRun bytes, and a chunk of at least minEntropyRun bytes that
// mixes letters and digits, is not all hex digits and dashes (git hashes,
// digests, UUIDs: identifiers an agent needs), and has at least
// minEntropyBits bits of Shannon entropy per byte is a secret.
const (
	minEntropyRun  = 24
	maxEntropyRun  = 4 << 10
	minEntropyBits = 4.0
)

// A matcher holds the compiled rules of a Redactor.
type matcher struct {
	lits []Literal // longest first
	// byValue are the indexes in lits in the order of their values, and
	// litPair the range of byValue whose values begin with two bytes: a
	// position is matched against the literals by narrowing that range a
	// byte at a time, so its cost grows with the match, not with the
	// number of literals (a file of many values that share a prefix).
	byValue []int32
	litPair map[uint16][2]int32
	trigs   []trigger
	byFirst [256][]int32 // indexes in trigs, by first byte in either case
	first   [256]bool    // a literal or prefix may begin with this byte
	pair    []uint64     // bitset: a literal or prefix may begin with these two bytes
	entropy bool
	tok     byteSet // the bytes of an entropy token
}

// A trigger is one prefix of a rule.
type trigger struct {
	prefix string
	rule   *rule
	prio   int // breaks ties between spans: lower wins
}

// span is a match: text[start:end] is redacted as kind, and the rule that
// found it began at q.
type span struct {
	q, start, end int
	prio          int
	kind          string
}

// pending is what a scan of incomplete text could not decide yet: the
// earliest position an undecided rule began at (q), and the earliest
// position it could still redact (hold). Both are len(text) when nothing
// is undecided.
type pending struct{ q, hold int }

func (p *pending) add(q, hold int) {
	p.q = min(p.q, q)
	p.hold = min(p.hold, hold)
}

func newMatcher(lits []Literal, rules []rule, entropy bool) matcher {
	m := matcher{
		lits:    lits,
		litPair: make(map[uint16][2]int32),
		pair:    make([]uint64, 1<<16/64),
		entropy: entropy,
		tok:     set("A-Za-z0-9+/=_-"),
	}
	addPair := func(a, b byte) {
		m.first[a] = true
		k := pairKey(a, b)
		m.pair[k/64] |= 1 << (k % 64)
	}
	m.byValue = make([]int32, len(lits))
	for i := range lits {
		m.byValue[i] = int32(i)
	}
	slices.SortFunc(m.byValue, func(a, b int32) int { return cmp.Compare(lits[a].Value, lits[b].Value) })
	for j, i := range m.byValue {
		l := lits[i].Value
		k := pairKey(l[0], l[1])
		r, ok := m.litPair[k]
		if !ok {
			r[0] = int32(j)
		}
		r[1] = int32(j + 1)
		m.litPair[k] = r
		addPair(l[0], l[1])
	}
	for i := range rules {
		r := &rules[i]
		for _, p := range r.prefixes {
			k := int32(len(m.trigs))
			m.trigs = append(m.trigs, trigger{prefix: p, rule: r, prio: 1 + i})
			cases := func(c byte) []byte {
				if r.fold && 'a' <= c && c <= 'z' {
					return []byte{c, c - 'a' + 'A'}
				}
				return []byte{c}
			}
			for _, a := range cases(p[0]) {
				m.byFirst[a] = append(m.byFirst[a], k)
				for _, b := range cases(p[1]) {
					addPair(a, b)
				}
			}
		}
	}
	return m
}

func pairKey(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

// scan finds the matches of every rule that begins in text[from:]; text[:from]
// is context (the byte before, for rules that look at it). If eof is false,
// more text may follow: a rule that needs it to decide is left pending.
// off is the entropy rule's position at text[from] in its chunk (0 at the
// start of a run). The spans, appended to spans, come sorted.
func (m *matcher) scan(text []byte, from, off int, eof bool, spans []span) ([]span, pending) {
	n := len(text)
	pd := pending{n, n}
	var c *cursor // one for the scan: a rule's body would move each to the heap
	for q := from; q < n; q++ {
		b := text[q]
		if !m.first[b] {
			continue
		}
		if q+1 < n {
			k := pairKey(b, text[q+1])
			if m.pair[k/64]&(1<<(k%64)) == 0 {
				continue
			}
		}
		if c == nil {
			c = new(cursor)
		}
		spans = m.at(c, text, q, eof, spans, &pd)
	}
	if m.entropy {
		spans = m.scanEntropy(text, from, off, eof, spans, &pd)
	}
	slices.SortFunc(spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end), cmp.Compare(a.prio, b.prio))
	})
	return spans, pd
}

// at tries the literals and the rules that may begin at text[q], with c
// as scratch.
func (m *matcher) at(c *cursor, text []byte, q int, eof bool, spans []span, pd *pending) []span {
	rest := text[q:]
	if len(m.lits) > 0 {
		switch i, more := m.literalAt(rest, eof); {
		case more:
			pd.add(q, q) // a longer literal may match yet
		case i >= 0:
			l := m.lits[i]
			spans = append(spans, span{q: q, start: q, end: q + len(l.Value), kind: l.Kind})
		}
	}
	for _, k := range m.byFirst[rest[0]] {
		t := &m.trigs[k]
		ru := t.rule
		if ru.after != nil {
			prev := -1
			if q > 0 {
				prev = int(text[q-1])
			}
			if !ru.after(prev) {
				continue
			}
		}
		*c = cursor{text: text, q: q, i: q, eof: eof, hold: len(text)}
		if ru.atPrefix {
			c.hold = q
		}
		var start, end int
		ok := c.lit(t.prefix, ru.fold)
		if ok {
			start, end, ok = ru.body(c)
		}
		switch {
		case c.more:
			pd.add(q, c.hold)
		case ok && end > start:
			spans = append(spans, span{q: q, start: start, end: end, prio: t.prio, kind: ru.kind})
		}
	}
	return spans
}

// literalAt returns the index in lits of the longest literal that rest
// begins with, or -1; more is true, instead, when rest is the start of a
// longer literal and more text may follow (not eof). The literals that
// share rest's first k bytes are a range of byValue, sorted, in which one
// equal to rest[:k] comes first; each next byte narrows the range by a
// binary search on that byte alone.
func (m *matcher) literalAt(rest []byte, eof bool) (i int, more bool) {
	var lo, hi int
	k := 1
	if len(rest) >= 2 {
		r, ok := m.litPair[pairKey(rest[0], rest[1])]
		if !ok {
			return -1, false
		}
		lo, hi, k = int(r[0]), int(r[1]), 2
	} else {
		lo, hi = m.narrow(0, len(m.byValue), 0, rest[0])
	}
	i = -1
	for {
		if lo < hi && len(m.lits[m.byValue[lo]].Value) == k {
			i = int(m.byValue[lo]) // equal to rest[:k]; a longer one may follow
			lo++
		}
		if lo >= hi {
			return i, false
		}
		if k == len(rest) {
			// Every literal left is longer than rest and begins with it.
			if !eof {
				return -1, true
			}
			return i, false
		}
		lo, hi = m.narrow(lo, hi, k, rest[k])
		k++
	}
}

// narrow returns the part of byValue[lo:hi], whose values all have more
// than k bytes and share their first k, whose byte k is c.
func (m *matcher) narrow(lo, hi, k int, c byte) (int, int) {
	at := func(j int) byte { return m.lits[m.byValue[j]].Value[k] }
	a := lo + sort.Search(hi-lo, func(j int) bool { return at(lo+j) >= c })
	b := a + sort.Search(hi-a, func(j int) bool { return at(a+j) > c })
	return a, b
}

// scanEntropy applies the entropy rule to text[from:], off being the
// position of text[from] in its chunk.
func (m *matcher) scanEntropy(text []byte, from, off int, eof bool, spans []span, pd *pending) []span {
	n := len(text)
	for i := from; i < n; {
		if !m.tok.has(text[i]) {
			i, off = i+1, 0
			continue
		}
		if off != 0 {
			// The rest of a chunk that began before from, and was
			// decided then.
			for i < n && off < maxEntropyRun && m.tok.has(text[i]) {
				i, off = i+1, off+1
			}
			off %= maxEntropyRun
			continue
		}
		s := i
		for i < n && i-s < maxEntropyRun && m.tok.has(text[i]) {
			i++
		}
		switch {
		case i-s < maxEntropyRun && i == n && !eof:
			pd.add(s, s)
		case isRandom(text[s:i]):
			spans = append(spans, span{q: s, start: s, end: i, prio: math.MaxInt, kind: "entropy"})
		}
	}
	return spans
}

// entropyOffset advances off, the entropy chunk position of text[from],
// to that of text[to].
func (m *matcher) entropyOffset(text []byte, from, off, to int) int {
	i := to
	for i > from && m.tok.has(text[i-1]) {
		i--
	}
	if i > from {
		off = 0 // text[i-1] ends the run before the one to is in
	}
	return (off + to - i) % maxEntropyRun
}

// isRandom reports whether tok looks like a random secret.
func isRandom(tok []byte) bool {
	if len(tok) < minEntropyRun {
		return false
	}
	var freq [256]uint16 // len(tok) <= maxEntropyRun
	letter, digit, hexOnly := false, false, true
	for _, c := range tok {
		freq[c]++
		switch {
		case '0' <= c && c <= '9':
			digit = true
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			letter = true
			if lc := lower(c); lc > 'f' {
				hexOnly = false
			}
		case c != '-':
			hexOnly = false
		}
	}
	if !letter || !digit || hexOnly {
		return false
	}
	bits, n := 0.0, float64(len(tok))
	for _, f := range freq {
		if f > 0 {
			p := float64(f) / n
			bits -= p * math.Log2(p)
		}
	}
	return bits >= minEntropyBits
}

// render appends text[from:to] to dst with every span in it replaced by
// its marker, and counts the markers in counts (made if nil). Spans that
// overlap merge into one marker, named by the first. No span may cross
// from or to; spans outside are skipped.
func render(dst, text []byte, from, to int, spans []span, counts Counts) ([]byte, Counts) {
	pos := from
	for k := 0; k < len(spans); {
		sp := spans[k]
		k++
		if sp.start < from || sp.start >= to {
			continue
		}
		end := sp.end
		for k < len(spans) && spans[k].start < end {
			end = max(end, spans[k].end)
			k++
		}
		dst = append(dst, text[pos:sp.start]...)
		dst = append(dst, "[REDACTED:"...)
		dst = append(dst, sp.kind...)
		dst = append(dst, ']')
		if counts == nil {
			counts = make(Counts)
		}
		counts[sp.kind]++
		pos = end
	}
	return append(dst, text[pos:to]...), counts
}

// String returns s with its secrets replaced by markers, and how many of
// each kind it replaced. With nothing to replace it returns s.
func (r *Redactor) String(s string) (string, Counts) {
	b := []byte(s)
	spans, _ := r.cur.Load().scan(b, 0, 0, true, nil)
	if len(spans) == 0 {
		return s, nil
	}
	out, counts := render(make([]byte, 0, len(b)+16*len(spans)), b, 0, len(b), spans, nil)
	return string(out), counts
}

// Bytes returns b with its secrets replaced by markers, and how many of
// each kind it replaced. With nothing to replace it returns b itself;
// otherwise it returns a new slice and leaves b alone.
func (r *Redactor) Bytes(b []byte) ([]byte, Counts) {
	spans, _ := r.cur.Load().scan(b, 0, 0, true, nil)
	if len(spans) == 0 {
		return b, nil
	}
	return render(make([]byte, 0, len(b)+16*len(spans)), b, 0, len(b), spans, nil)
}
