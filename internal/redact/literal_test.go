package redact

import (
	"math/rand/v2"
	"testing"
)

// naiveLiteralAt is literalAt as first written: every literal that
// shares the first two bytes, longest first; the first that matches whole,
// or that rest is the start of (with more to come), decides.
func naiveLiteralAt(m *matcher, rest []byte, eof bool) (int, bool) {
	for i, l := range m.lits {
		if l.Value[0] != rest[0] || (len(rest) >= 2 && l.Value[1] != rest[1]) {
			continue
		}
		if len(rest) >= len(l.Value) {
			if string(rest[:len(l.Value)]) == l.Value {
				return i, false
			}
		} else if !eof && string(rest) == l.Value[:len(rest)] {
			return -1, true
		}
	}
	return -1, false
}

// TestLiteralAtMatchesNaive: the literal index answers as the plain
// longest-first scan does, for random literals over a small alphabet
// (many shared prefixes, values that are prefixes of others) and random
// text, complete or not.
func TestLiteralAtMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(lo, hi int) string {
		b := make([]byte, lo+rng.IntN(hi-lo+1))
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for round := range 300 {
		var in []Literal
		for range 1 + rng.IntN(40) {
			in = append(in, Literal{Value: word(MinSecretLen, 10), Kind: "file"})
		}
		m := newMatcher(literals(in), nil, false)
		for range 200 {
			rest := []byte(word(1, 14))
			for _, eof := range []bool{false, true} {
				gi, gm := m.literalAt(rest, eof)
				wi, wm := naiveLiteralAt(&m, rest, eof)
				if gi != wi || gm != wm {
					t.Fatalf("round %d, %q (eof %v) over %d literals: got (%d, %v), want (%d, %v)", round, rest, eof, len(m.lits), gi, gm, wi, wm)
				}
			}
		}
	}
}
