package redact

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// MinSecretLen is the shortest value, in bytes, that a secret file, an
// environment variable or a [Literal] contributes. Shorter values (a port,
// "true", a region code) would redact ordinary words wherever they appear,
// so they are ignored, however secret they are meant to be.
const MinSecretLen = 6

// Config says what counts as a secret: the redact section of tandem.yaml.
type Config struct {
	// SecretFiles are files whose values are secrets: dotenv, INI (such as
	// ~/.aws/credentials) or JSON. A leading "~/" means Options.Home. Every
	// value of at least MinSecretLen bytes counts, so list files that hold
	// secrets, not general configuration.
	SecretFiles []string `yaml:"secretFiles"`
	// Env names environment variables whose values are secrets. A name
	// that is unset has no value to hide and is skipped.
	Env []string `yaml:"env"`
	// Patterns turns the built-in token patterns (cloud keys, API tokens,
	// JWTs, private keys, passwords in URLs and connection strings) on or
	// off. Nil means on.
	Patterns *bool `yaml:"patterns"`
	// Entropy also redacts long random-looking strings: runs of at least
	// 24 bytes of [A-Za-z0-9+/=_-] that mix letters and digits and carry
	// at least 4 bits of Shannon entropy per byte. Hex strings (git
	// hashes, digests, UUIDs) are never taken: they are identifiers an
	// agent needs. It catches secrets no pattern knows, at the cost of
	// base64 hashes and IDs that look random too, and it makes a Stream
	// hold back a word at the end of its text until the next byte; so it
	// is off unless set.
	Entropy bool `yaml:"entropy"`
	// Viewers says whether human viewers see redacted output too. This
	// package carries it for the caller and does not use it.
	Viewers bool `yaml:"viewers"`
}

// Options are what New needs from outside the config file: the facts of
// the process, passed in so that the package reads no environment.
type Options struct {
	// Home expands a leading "~/" in Config.SecretFiles. Empty means such
	// a path is an error.
	Home string
	// Environ is the KEY=VALUE list Config.Env names are looked up in
	// (os.Environ() in a real run). A later entry for a key wins.
	Environ []string
	// Root, if set, is a directory others may write (a sandboxed
	// session's workspace): a relative secret file is opened beneath it,
	// never through a symlink or ".." that leads out of it, so a file put
	// there cannot make tandem read, or report on, anything else. One that
	// does not exist there is skipped: that project has no such secrets.
	Root string
	// Base, if set and Root is not, is the directory a relative secret
	// file is read in (an ssh target's: tandem.yaml's directory). As under
	// Root, one that does not exist there is skipped until it appears: a
	// relative path names the project's file, which a project may lack
	// (the README's top-level `secretFiles: [.env]`), while an absolute
	// or "~/" path names one file the operator expects, so its absence is
	// an error.
	Base string
	// Literals are further secret values, such as an SSH password tandem
	// holds. Nil means none.
	Literals []Literal
}

// Literal is one secret value matched exactly.
type Literal struct {
	// Value is the secret. Values shorter than MinSecretLen are ignored.
	Value string
	// Kind names the secret in its marker, e.g. "ssh-password". Empty
	// means "literal".
	Kind string
}

// Redactor finds secrets in text and replaces them with markers. It is
// safe for concurrent use. What it finds changes only by Refresh.
type Redactor struct {
	cur atomic.Pointer[matcher]
	// files are the secret files' sources, for Refresh; nil when the
	// config lists none.
	files *sources
}

// sources is what a Redactor was built from, and the stamps of the secret
// files it read.
type sources struct {
	c Config
	o Options

	mu      sync.Mutex
	stamps  []stamp
	lastErr string // the last Refresh error, reported once
	// current are the values the files hold as last read, and before
	// those they held in earlier versions: a value removed or moved from
	// a file stays a secret (at most maxBefore of them).
	current, before []string
}

// maxBefore bounds the values a Redactor keeps from earlier versions of
// its secret files, so that a file rewritten in a loop cannot grow it
// without end.
const maxBefore = 4096

// New compiles c into a Redactor, reading c.SecretFiles. An error names the
// file or setting that is wrong and why.
func New(c Config, o Options) (*Redactor, error) {
	m, stamps, vals, err := build(c, o, nil)
	if err != nil {
		return nil, err
	}
	r := &Redactor{}
	r.cur.Store(m)
	if len(c.SecretFiles) > 0 {
		r.files = &sources{c: c, o: o, stamps: stamps, current: vals}
	}
	return r, nil
}

// build reads the secret files and compiles the matcher, with before as
// further values of the files; vals are the files' values now.
func build(c Config, o Options, before []string) (m *matcher, stamps []stamp, vals []string, err error) {
	var lits []Literal
	stamps = make([]stamp, 0, len(c.SecretFiles))
	for _, p := range c.SecretFiles {
		v, st, err := readSecretFile(p, o)
		if err != nil {
			return nil, nil, nil, err
		}
		stamps = append(stamps, st)
		vals = append(vals, v...)
	}
	for _, v := range slices.Concat(vals, before) {
		lits = append(lits, Literal{Value: v, Kind: "file"})
	}
	env := environ(o.Environ)
	for _, name := range c.Env {
		if name == "" || strings.Contains(name, "=") {
			return nil, nil, nil, fmt.Errorf("redact: env: %q is not an environment variable name", name)
		}
		if v, ok := env[name]; ok {
			lits = append(lits, Literal{Value: v, Kind: "env"})
		}
	}
	for _, l := range o.Literals {
		if l.Kind == "" {
			l.Kind = "literal"
		}
		lits = append(lits, l)
	}
	var rules []rule
	if c.Patterns == nil || *c.Patterns {
		rules = builtinRules()
	}
	nm := newMatcher(literals(lits), rules, c.Entropy)
	return &nm, stamps, vals, nil
}

// Refresh reads the secret files again if any changed since they were
// last read (a new inode, size or modification time; one created or
// removed): a .env written after a session started counts from the next
// command on. Streams already made pick the new values up once they hold
// nothing back. When a changed file cannot be used, the values read before
// stay in force and the error is returned, once per distinct error.
func (r *Redactor) Refresh() error {
	f := r.files
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	for i, p := range f.c.SecretFiles {
		st, err := statSecretFile(p, f.o)
		if err != nil || st != f.stamps[i] {
			changed = true
			break
		}
	}
	if !changed {
		return nil
	}
	// Newest first, each value once, the oldest dropped past maxBefore.
	var before []string
	seen := map[string]bool{}
	for _, v := range slices.Concat(f.current, f.before) {
		if !seen[v] && len(before) < maxBefore {
			seen[v] = true
			before = append(before, v)
		}
	}
	m, stamps, vals, err := build(f.c, f.o, before)
	if err != nil {
		if msg := err.Error(); msg != f.lastErr {
			f.lastErr = msg
			return err
		}
		return nil
	}
	f.stamps, f.lastErr, f.before, f.current = stamps, "", before, vals
	r.cur.Store(m)
	return nil
}

// environ maps a KEY=VALUE list; a later entry for a key wins, as in
// os/exec.
func environ(kv []string) map[string]string {
	m := make(map[string]string, len(kv))
	for _, e := range kv {
		if k, v, ok := strings.Cut(e, "="); ok {
			m[k] = v
		}
	}
	return m
}

// literals prepares secret values for matching: it trims from each a
// partial rune at either end (such bytes cannot occur in valid UTF-8 text
// next to the rest, and a match there would cut a rune in two), drops
// values shorter than MinSecretLen, keeps the first kind given for a
// repeated value, and sorts the rest longest first. A value with "\n" line
// breaks is matched with "\r\n" ones too, as a terminal prints it; one
// with a single quote is matched as it reads inside a single-quoted word
// of an argv, each quote closed, escaped and opened again: tandem shows a
// program held for approval so.
func literals(in []Literal) []Literal {
	seen := make(map[string]bool, len(in))
	var out []Literal
	add := func(v, kind string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			out = append(out, Literal{Value: v, Kind: kind})
		}
	}
	for _, l := range in {
		v := trimPartialRunes(l.Value)
		add(v, l.Kind)
		if strings.Contains(v, "\n") && !strings.Contains(v, "\r\n") {
			add(strings.ReplaceAll(v, "\n", "\r\n"), l.Kind)
		}
		if strings.Contains(v, "'") {
			add(strings.ReplaceAll(v, "'", `'\''`), l.Kind)
		}
	}
	slices.SortStableFunc(out, func(a, b Literal) int { return len(b.Value) - len(a.Value) })
	return out
}

// trimPartialRunes removes continuation bytes from the start of s and an
// incomplete rune from its end.
func trimPartialRunes(s string) string {
	for s != "" && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	for k := len(s) - 1; k >= 0 && k >= len(s)-utf8.UTFMax; k-- {
		if utf8.RuneStart(s[k]) {
			if !utf8.FullRuneInString(s[k:]) {
				s = s[:k]
			}
			break
		}
	}
	return s
}

// Counts says how many markers of each kind a redaction wrote, so that a
// caller can tell the agent (or an audit log) that something was hidden.
// A marker that covers several overlapping matches counts once, under its
// own kind. A nil Counts means none.
type Counts map[string]int

// Total is the number of markers of all kinds.
func (c Counts) Total() int {
	n := 0
	for _, k := range c {
		n += k
	}
	return n
}

// FileError is a secret file that could not be read or parsed.
type FileError struct {
	// Path is the file as configured, before "~/" is expanded.
	Path string
	// Line is the 1-based line at fault, or 0 for the whole file.
	Line int
	// Err is what was wrong.
	Err error
}

// Error says which file, which line if any, and what was wrong.
func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("redact: secret file %s: line %d: %v", e.Path, e.Line, e.Err)
	}
	return fmt.Sprintf("redact: secret file %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause, so that errors.Is(err, fs.ErrNotExist) works.
func (e *FileError) Unwrap() error { return e.Err }

// errNoHome is a "~/" path when Options.Home is empty.
var errNoHome = errors.New("no home directory to expand ~/ in (Options.Home is empty)")
