package redact

import (
	"bytes"
	"unicode/utf8"
)

// Bounds on how far a built-in rule looks past where it begins. They bound
// what a Stream holds back while a match is undecided.
const (
	maxToken   = 255      // the body of an API token
	maxValue   = 256      // a password or URL user name
	maxJWTPart = 1 << 10  // a JWT header or signature
	maxJWTBody = 6 << 10  // a JWT payload
	maxPEM     = 16 << 10 // a PEM private key block, BEGIN line to END line
	maxBlank   = 8        // spaces around '=' in key = value
)

// byteSet is a set of bytes.
type byteSet [4]uint64

// set returns the bytes spec lists, where "a-z" is a range and a '-' at
// either end stands for itself.
func set(spec string) byteSet {
	var s byteSet
	for i := 0; i < len(spec); i++ {
		lo, hi := spec[i], spec[i]
		if i+2 < len(spec) && spec[i+1] == '-' {
			hi = spec[i+2]
			i += 2
		}
		for c := int(lo); c <= int(hi); c++ {
			s[c>>6] |= 1 << (c & 63)
		}
	}
	return s
}

// not returns every byte outside s.
func not(s byteSet) byteSet {
	for i := range s {
		s[i] = ^s[i]
	}
	return s
}

func (s *byteSet) has(c byte) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// lower folds an ASCII letter to lower case.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// A cursor walks the text after the position q where a rule may begin.
// Each step consumes bytes or fails; a step that reaches the end of the
// text before it can tell sets more (unless the text is complete), and
// the rule's outcome then waits for more input.
type cursor struct {
	text []byte
	q, i int
	eof  bool
	more bool
	// hold is the earliest position a match could still cover when more
	// is set: q for a rule whose match starts at its prefix, the start of
	// the value for one that redacts only a value after a key.
	hold int
}

// ended reports whether the cursor is at the end of the text, and notes
// that more input could decide the step.
func (c *cursor) ended() bool {
	if c.i < len(c.text) {
		return false
	}
	if !c.eof {
		c.more = true
	}
	return true
}

// lit consumes s, comparing ASCII letters in any case if fold is set (s is
// then lower case).
func (c *cursor) lit(s string, fold bool) bool {
	for k := 0; k < len(s); k++ {
		if c.ended() {
			return false
		}
		b := c.text[c.i]
		if fold {
			b = lower(b)
		}
		if b != s[k] {
			return false
		}
		c.i++
	}
	return true
}

// run consumes up to max bytes of s and returns how many. A run cut at max
// ends at a rune boundary, so that a set admitting non-ASCII bytes never
// splits a rune.
func (c *cursor) run(s *byteSet, max int) int {
	start := c.i
	for c.i-start < max && !c.ended() && s.has(c.text[c.i]) {
		c.i++
	}
	if c.i-start == max && !c.ended() {
		for c.i > start && !utf8.RuneStart(c.text[c.i]) {
			c.i--
		}
	}
	return c.i - start
}

// opt consumes the next byte if it is in s.
func (c *cursor) opt(s *byteSet) bool {
	if c.ended() || !s.has(c.text[c.i]) {
		return false
	}
	c.i++
	return true
}

// boundary reports whether the text ends or goes on with a byte outside s.
func (c *cursor) boundary(s *byteSet) bool {
	if c.ended() {
		return c.eof
	}
	return !s.has(c.text[c.i])
}

// A rule is a built-in pattern: one or more literal prefixes, a condition
// on the byte before, and a body that reads what follows a prefix.
type rule struct {
	kind     string
	prefixes []string
	fold     bool // prefixes match in any case (they are written lower case)
	// after, when set, says whether a match may begin after the byte prev
	// (-1 at the start of the text).
	after func(prev int) bool
	// atPrefix says the match starts at the prefix; otherwise only a
	// value after it is redacted, and body sets cursor.hold to its start.
	atPrefix bool
	// body reads from the cursor, just past the prefix, and returns the
	// span to redact.
	body func(c *cursor) (start, end int, ok bool)
}

// builtinRules returns the built-in patterns.
func builtinRules() []rule {
	var (
		alnum    = set("A-Za-z0-9")
		upperNum = set("A-Z0-9")
		b64url   = set("A-Za-z0-9_-")
		b64      = set("A-Za-z0-9/+=")
		scheme   = set("A-Za-z0-9+.-")
		blank    = set(" \t")
		quote    = set(`"'`)
		eqColon  = set("=:")
		pemLabel = set("A-Z0-9 ")
		// A password in a URL ends at '@'; neither it nor the user name
		// runs past '/', '?', '#', a quote, a bracket or white space.
		urlPass = not(set("\x00-\x20\x7f/@?#\"'<>"))
		urlUser = not(set("\x00-\x20\x7f/@?#\"'<>:"))
		// A password in a connection string or query ends at ';', '&',
		// white space or a quote.
		passValue = not(set("\x00-\x20\x7f;&\"'"))
	)
	notAfter := func(s byteSet) func(int) bool {
		return func(prev int) bool { return prev < 0 || !s.has(byte(prev)) }
	}
	token := func(kind string, prefixes []string, body byteSet, min int) rule {
		return rule{
			kind: kind, prefixes: prefixes, after: notAfter(alnum), atPrefix: true,
			body: func(c *cursor) (int, int, bool) {
				n := c.run(&body, maxToken)
				return c.q, c.i, n >= min
			},
		}
	}
	// password redacts the value of password=, passwd= or, unless the
	// value is a path (a shell's PWD and OLDPWD), pwd=.
	password := func(prefixes []string, pathOK bool) rule {
		return rule{
			kind: "password", prefixes: prefixes, fold: true,
			body: func(c *cursor) (int, int, bool) {
				c.run(&blank, maxBlank)
				if !c.lit("=", false) {
					return 0, 0, false
				}
				c.run(&blank, maxBlank)
				c.opt(&quote)
				c.hold = c.i
				start := c.i
				if c.run(&passValue, maxValue) == 0 {
					return 0, 0, false
				}
				if !pathOK && (c.text[start] == '/' || c.text[start] == '~') {
					return 0, 0, false
				}
				return start, c.i, true
			},
		}
	}
	return []rule{
		{
			kind: "aws-key", prefixes: []string{"AKIA", "ASIA"}, after: notAfter(alnum), atPrefix: true,
			body: func(c *cursor) (int, int, bool) {
				ok := c.run(&upperNum, 16) == 16 && c.boundary(&alnum)
				return c.q, c.i, ok
			},
		},
		{
			kind: "aws-secret", prefixes: []string{"aws_secret_access_key"}, fold: true,
			body: func(c *cursor) (int, int, bool) {
				c.opt(&quote)
				c.run(&blank, maxBlank)
				if !c.opt(&eqColon) {
					return 0, 0, false
				}
				c.run(&blank, maxBlank)
				c.opt(&quote)
				c.hold = c.i
				start := c.i
				n := c.run(&b64, 128)
				return start, c.i, n >= 20
			},
		},
		token("github", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, alnum, 36),
		token("github", []string{"github_pat_"}, set("A-Za-z0-9_"), 82),
		token("gitlab", []string{"glpat-"}, b64url, 20),
		token("slack", []string{"xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"}, set("A-Za-z0-9-"), 10),
		token("stripe", []string{"sk_live_", "rk_live_", "sk_test_"}, alnum, 24),
		{
			kind: "jwt", prefixes: []string{"eyJ"}, after: notAfter(b64url), atPrefix: true,
			body: func(c *cursor) (int, int, bool) {
				ok := c.run(&b64url, maxJWTPart) > 0 && c.lit(".", false) &&
					c.lit("eyJ", false) && c.run(&b64url, maxJWTBody) > 0 && c.lit(".", false)
				if ok {
					c.run(&b64url, maxJWTPart) // the signature, empty for alg "none"
				}
				return c.q, c.i, ok
			},
		},
		{
			kind: "private-key", prefixes: []string{"-----BEGIN "}, atPrefix: true,
			body: func(c *cursor) (int, int, bool) {
				start := c.i
				c.run(&pemLabel, 64)
				label := c.text[start:c.i]
				if !c.lit("-----", false) || !bytes.Contains(label, []byte("PRIVATE KEY")) {
					return 0, 0, false
				}
				return pemEnd(c, label)
			},
		},
		{
			kind: "url-password", prefixes: []string{"://"},
			after: func(prev int) bool { return prev >= 0 && scheme.has(byte(prev)) },
			body: func(c *cursor) (int, int, bool) {
				c.run(&urlUser, maxValue)
				if !c.lit(":", false) {
					return 0, 0, false
				}
				c.hold = c.i
				start := c.i
				if c.run(&urlPass, maxValue) == 0 {
					return 0, 0, false
				}
				end := c.i
				return start, end, c.lit("@", false)
			},
		},
		password([]string{"password", "passwd"}, true),
		password([]string{"pwd"}, false),
	}
}

// pemEnd finds the END line matching label, the cursor being just past the
// BEGIN line. A block whose END line is not within maxPEM bytes of its
// BEGIN is redacted up to that bound: a key is never let through, and what
// comes after so long a block is not held back for ever. A block the text
// ends inside is redacted to the end.
func pemEnd(c *cursor, label []byte) (int, int, bool) {
	end := make([]byte, 0, len(label)+14)
	end = append(append(append(end, "-----END "...), label...), "-----"...)
	limit := c.q + maxPEM
	if k := bytes.Index(c.text[c.i:min(limit, len(c.text))], end); k >= 0 {
		return c.q, c.i + k + len(end), true
	}
	if limit < len(c.text) {
		for limit > c.i && !utf8.RuneStart(c.text[limit]) {
			limit--
		}
		return c.q, limit, true
	}
	if c.eof {
		return c.q, len(c.text), true
	}
	c.more = true
	return 0, 0, false
}
