package policy

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// pword is one compiled word of a rule's command pattern.
type pword struct {
	run  bool   // the word is exactly `*`: it matches zero or more whole argv words
	lit  string // when glob is nil, the argv word must equal lit
	glob []gtok // a glob over one argv word, when the word has unquoted * ? or [...]
}

// gtok is one element of a single-word glob.
type gtok struct {
	kind  gkind
	r     rune       // for gLit
	class *charClass // for gClass
}

type gkind uint8

const (
	gLit gkind = iota
	gAny
	gStar
	gClass
)

// charClass is a bracket expression such as [a-z] or [![:space:]].
type charClass struct {
	neg    bool
	ranges []runeRange
	named  []func(rune) bool
}

type runeRange struct{ lo, hi rune }

func (c *charClass) matches(r rune) bool {
	in := false
	for _, rr := range c.ranges {
		if rr.lo <= r && r <= rr.hi {
			in = true
			break
		}
	}
	if !in {
		for _, f := range c.named {
			if f(r) {
				in = true
				break
			}
		}
	}
	return in != c.neg
}

// namedClasses are the POSIX character classes a bracket expression may name.
var namedClasses = map[string]func(rune) bool{
	"alnum":  func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) },
	"alpha":  unicode.IsLetter,
	"blank":  func(r rune) bool { return r == ' ' || r == '\t' },
	"cntrl":  unicode.IsControl,
	"digit":  func(r rune) bool { return '0' <= r && r <= '9' },
	"graph":  func(r rune) bool { return unicode.IsGraphic(r) && !unicode.IsSpace(r) },
	"lower":  unicode.IsLower,
	"print":  unicode.IsPrint,
	"punct":  unicode.IsPunct,
	"space":  unicode.IsSpace,
	"upper":  unicode.IsUpper,
	"xdigit": func(r rune) bool { return strings.ContainsRune("0123456789abcdefABCDEF", r) },
}

// errPatternExpansion is returned for pattern words that would need the
// shell to expand them; a rule must say literally what it matches.
var errPatternExpansion = errors.New("expansions and substitutions ($x, $(…), `…`, <(…)) are not allowed in a pattern")

// compilePattern splits a rule's command into pattern words using shell
// quoting, so that `git commit -m '*'` has a literal star as its last word.
func compilePattern(p *syntax.Parser, s string) ([]pword, error) {
	var words []pword
	for w, err := range p.WordsSeq(strings.NewReader(s)) {
		if err != nil {
			return nil, fmt.Errorf("not a single simple command: %w", err)
		}
		pw, err := compileWord(w)
		if err != nil {
			return nil, err
		}
		words = append(words, pw)
	}
	if len(words) == 0 {
		return nil, errors.New("the pattern has no words")
	}
	if first := words[0]; first.glob == nil && !first.run && isAssignment(first.lit) {
		return nil, fmt.Errorf("%q is an assignment; assignments before a command are removed before judging, so write the command without it", first.lit)
	}
	return words, nil
}

// isAssignment reports whether s looks like NAME=value.
func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && (i == 0 || !(r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// compileWord turns one parsed pattern word into a literal or a glob.
func compileWord(w *syntax.Word) (pword, error) {
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && l.Value == "*" {
			return pword{run: true}, nil
		}
	}
	var toks []gtok
	lits := func(s string) {
		for _, r := range s {
			toks = append(toks, gtok{kind: gLit, r: r})
		}
	}
	for _, part := range w.Parts {
		switch part := part.(type) {
		case *syntax.Lit:
			toks = appendGlob(toks, part.Value)
		case *syntax.SglQuoted:
			if part.Dollar && strings.ContainsRune(part.Value, '\\') {
				return pword{}, errors.New("$'…' quoting with escapes is not supported in a pattern; use plain quotes")
			}
			lits(part.Value)
		case *syntax.DblQuoted:
			if part.Dollar {
				return pword{}, errPatternExpansion
			}
			for _, in := range part.Parts {
				l, ok := in.(*syntax.Lit)
				if !ok {
					return pword{}, errPatternExpansion
				}
				var b strings.Builder
				unquoteDbl(&b, l.Value)
				lits(b.String())
			}
		case *syntax.ExtGlob:
			return pword{}, errors.New("extended globs such as @(…) are not supported in a pattern")
		default:
			return pword{}, errPatternExpansion
		}
	}
	literal := true
	for _, t := range toks {
		if t.kind != gLit {
			literal = false
			break
		}
	}
	if literal {
		var b strings.Builder
		for _, t := range toks {
			b.WriteRune(t.r)
		}
		return pword{lit: b.String()}, nil
	}
	return pword{glob: toks}, nil
}

// appendGlob compiles an unquoted part of a pattern word: backslash
// escapes, *, ? and bracket expressions.
func appendGlob(toks []gtok, s string) []gtok {
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				if s[i+1] == '\n' {
					i += 2
					continue
				}
				r, n := utf8.DecodeRuneInString(s[i+1:])
				toks = append(toks, gtok{kind: gLit, r: r})
				i += 1 + n
				continue
			}
		case '*':
			toks = append(toks, gtok{kind: gStar})
			i++
			continue
		case '?':
			toks = append(toks, gtok{kind: gAny})
			i++
			continue
		case '[':
			if cl, n := parseClass(s[i:]); cl != nil {
				toks = append(toks, gtok{kind: gClass, class: cl})
				i += n
				continue
			}
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		toks = append(toks, gtok{kind: gLit, r: r})
		i += n
	}
	return toks
}

// parseClass parses a bracket expression at the start of s and returns it
// with its length, or nil if s has no complete one (then '[' is literal).
func parseClass(s string) (*charClass, int) {
	cl := &charClass{}
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		cl.neg = true
		i++
	}
	first := true
	for i < len(s) {
		if s[i] == ']' && !first {
			return cl, i + 1
		}
		first = false
		if strings.HasPrefix(s[i:], "[:") {
			if end := strings.Index(s[i+2:], ":]"); end >= 0 {
				f, ok := namedClasses[s[i+2:i+2+end]]
				if !ok {
					return nil, 0
				}
				cl.named = append(cl.named, f)
				i += 2 + end + 2
				continue
			}
		}
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		lo, n := utf8.DecodeRuneInString(s[i:])
		i += n
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			i++
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			var m int
			hi, m = utf8.DecodeRuneInString(s[i:])
			i += m
		}
		cl.ranges = append(cl.ranges, runeRange{lo, hi})
	}
	return nil, 0
}

// matchWord matches one pattern word against one literal argv word.
func (pw *pword) matchWord(s string) bool {
	if pw.glob == nil {
		return pw.lit == s
	}
	return globMatch(pw.glob, s)
}

// globMatch is the usual backtracking wildcard match; * crosses '/'.
// Its work is bounded by len(toks)*len(s).
func globMatch(toks []gtok, s string) bool {
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(s) {
		if ti < len(toks) {
			t := &toks[ti]
			if t.kind == gStar {
				starT, starS = ti, si
				ti++
				continue
			}
			r, n := utf8.DecodeRuneInString(s[si:])
			if t.kind == gAny || (t.kind == gLit && t.r == r) || (t.kind == gClass && t.class.matches(r)) {
				ti++
				si += n
				continue
			}
		}
		if starT < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		ti, si = starT+1, starS
	}
	for ti < len(toks) && toks[ti].kind == gStar {
		ti++
	}
	return ti == len(toks)
}

// match is how sure we are that a pattern matches an argv.
type match uint8

const (
	noMatch  match = iota
	mayMatch       // only if some non-literal words expand the right way
	isMatch        // whatever the non-literal words expand to
)

// matcher matches patterns against argvs, reusing its table.
type matcher struct {
	tab []match
}

// match matches a pattern against an argv, anchored at both ends. A run
// word (`*`) takes any number of argv words, literal or not. A non-literal
// argv word may expand to any number of words, so it may stand for any
// number of pattern words (including none): that gives at most mayMatch.
func (m *matcher) match(pat []pword, argv []word) match {
	if len(argv) > 0 && len(pat) > 0 && !pat[0].run && argv[0].lit && !matchCommandWord(&pat[0], argv[0].s) {
		return noMatch // the common case: another command
	}
	cols := len(argv) + 1
	size := (len(pat) + 1) * cols
	if cap(m.tab) < size {
		m.tab = make([]match, size)
	}
	tab := m.tab[:size]
	clear(tab)
	tab[0] = isMatch
	set := func(i, j int, v match) {
		if k := i*cols + j; v > tab[k] {
			tab[k] = v
		}
	}
	for i := 0; i <= len(pat); i++ {
		for j := 0; j < cols; j++ {
			s := tab[i*cols+j]
			if s == noMatch {
				continue
			}
			if i < len(pat) && pat[i].run {
				set(i+1, j, s)
				if j < len(argv) {
					set(i, j+1, s)
				}
			}
			if j == len(argv) {
				continue
			}
			a := &argv[j]
			if !a.lit {
				weak := min(s, mayMatch)
				set(i, j+1, weak) // expands to nothing
				if i < len(pat) {
					set(i+1, j, weak)   // expands to this word and more
					set(i+1, j+1, weak) // expands to this word
				}
				continue
			}
			if i < len(pat) && !pat[i].run {
				var ok bool
				if i == 0 && j == 0 {
					ok = matchCommandWord(&pat[0], a.s)
				} else {
					ok = pat[i].matchWord(a.s)
				}
				if ok {
					set(i+1, j+1, s)
				}
			}
		}
	}
	return tab[len(pat)*cols+len(argv)]
}

// matchCommandWord matches the command word by name as written, and by its
// base name when it has a path: rule `rm *` covers `/bin/rm -rf /`.
func matchCommandWord(pw *pword, s string) bool {
	if pw.matchWord(s) {
		return true
	}
	if strings.Contains(s, "/") {
		if b := path.Base(s); b != s && b != "/" && b != "." {
			return pw.matchWord(b)
		}
	}
	return false
}
