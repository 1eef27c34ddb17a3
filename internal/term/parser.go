package term

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"strconv"
	"strings"
)

// Control bytes that matter to the parser.
const (
	bel = 0x07
	can = 0x18
	sub = 0x1a
	esc = 0x1b
)

// maxMark bounds the payload of one 133/633 mark. A longer one is dropped
// as forged, so a program cannot make the parser hold unbounded memory.
const maxMark = 1 << 20

// keepBody is the largest mark buffer kept for reuse after a mark ends; a
// bigger one (left by a huge forged mark) is released.
const keepBody = 64 << 10

// Kind says which shell-integration mark an Event came from.
type Kind int

// The mark kinds, one per letter of the wire format (see the package doc).
// The zero Kind is not a valid kind.
const (
	PromptStart  Kind = iota + 1 // 133;A: the prompt is about to be drawn
	InputStart                   // 133;B: the prompt is drawn, input starts
	CommandStart                 // 133;C: the command's output starts
	CommandEnd                   // 133;D: the command ended, with its status
	CommandLine                  // 633;E: the command line being run
	Cwd                          // 633;P: the shell's working directory
	Private                      // 633;X: a tandem private mark
)

// String returns the Go name of k, for logs and test failures.
func (k Kind) String() string {
	switch k {
	case PromptStart:
		return "PromptStart"
	case InputStart:
		return "InputStart"
	case CommandStart:
		return "CommandStart"
	case CommandEnd:
		return "CommandEnd"
	case CommandLine:
		return "CommandLine"
	case Cwd:
		return "Cwd"
	case Private:
		return "Private"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one trusted mark: the shell integration, not a program running
// in the terminal, reported a change of shell state.
type Event struct {
	Kind Kind
	// Exit is the exit status of a CommandEnd; HasExit is false when the
	// mark carried no status or one that is not an integer.
	Exit    int
	HasExit bool
	// Text is the command line of a CommandLine, the path of a Cwd and the
	// name of a Private mark, unescaped.
	Text string
	// Fields holds the unescaped K=V pairs of a Private mark (a field
	// without '=' maps to ""); nil if there are none.
	Fields map[string]string
}

// Item is one piece of the parsed stream: exactly one of Data and Event is
// set. Data is display bytes; it may alias the caller's input or the
// parser's own buffer and is valid only during the callback, so copy it to
// keep it.
type Item struct {
	Data  []byte
	Event *Event
}

type parseState uint8

const (
	stGround  parseState = iota // passing display bytes through
	stIntro                     // matched p.n bytes of "ESC]133;" or "ESC]633;"
	stBody                      // inside a mark, collecting its payload
	stBodyEsc                   // inside a mark, right after an ESC
)

// Parser splits a terminal's output into display bytes and trusted events.
// It removes every OSC 133 and 633 sequence, trusted or forged, from the
// display stream, so a browser terminal never sees shell-integration marks
// and a program cannot make it see fake ones. Other bytes pass through
// unchanged and are held back only while they could still start a mark.
//
// A Parser is not safe for concurrent use.
type Parser struct {
	nonce  []byte
	st     parseState
	n      int     // introducer bytes matched, in stIntro
	intro  [5]byte // the introducer bytes matched so far, up to "ESC]133"
	body   []byte  // payload of the current mark, after the introducer
	over   bool    // the current mark passed maxMark; discard until its end
	forged int
}

// NewParser returns a Parser that trusts marks ending in "n="+nonce. With
// an empty nonce no mark is trusted.
func NewParser(nonce string) *Parser {
	return &Parser{nonce: []byte(nonce)}
}

// Forged returns how many 133/633 marks were dropped because they were
// untrusted: no or a wrong nonce, malformed, aborted, or oversized. A
// rising count means something in the terminal is printing marks.
func (p *Parser) Forged() int { return p.forged }

// Feed parses the next chunk of terminal output, calling fn with display
// bytes and events in stream order. A mark split across calls at any byte
// is handled as if it had arrived whole. fn must not call Feed.
func (p *Parser) Feed(b []byte, fn func(Item)) {
	start := 0  // start of the display run not yet passed to fn
	escAt := -1 // index in b of the ESC that began stIntro; -1 if before b
	emit := func(d []byte) {
		if len(d) > 0 {
			fn(Item{Data: d})
		}
	}
	// enterMark passes on the display run before the introducer.
	enterMark := func() {
		if escAt >= 0 {
			emit(b[start:escAt])
		}
	}

	for i := 0; i < len(b); {
		c := b[i]
		switch p.st {
		case stGround:
			j := bytes.IndexByte(b[i:], esc)
			if j < 0 {
				i = len(b)
				continue
			}
			i += j
			escAt = i
			p.st, p.n, p.intro[0] = stIntro, 1, esc
			i++

		case stIntro:
			if p.n == len(p.intro) {
				// "ESC]133" or "ESC]633": an OSC 133/633 unless c extends
				// the number.
				switch c {
				case ';':
					enterMark()
					p.st = stBody
					i++
					continue
				case bel, can, sub:
					// An OSC 133/633 without payload: never trusted.
					enterMark()
					p.forged++
					p.st = stGround
					i++
					start = i
					continue
				case esc:
					enterMark()
					p.st = stBodyEsc
					i++
					continue
				}
			} else if introNext(p.n, c) {
				p.intro[p.n] = c
				p.n++
				i++
				continue
			}
			// Not a mark: the introducer bytes are display. Reprocess c.
			if escAt < 0 {
				emit(p.intro[:p.n])
				start = i
			}
			p.st = stGround

		case stBody:
			j := i
			for j < len(b) && !endsMark(b[j]) {
				j++
			}
			p.appendBody(b[i:j])
			i = j
			if i == len(b) {
				continue
			}
			switch b[i] {
			case bel:
				p.endMark(fn, true)
			case can, sub:
				p.endMark(fn, false)
			case esc:
				p.st = stBodyEsc
				i++
				continue
			}
			p.st = stGround
			i++
			start = i

		case stBodyEsc:
			if c == '\\' {
				p.endMark(fn, true)
				p.st = stGround
				i++
				start = i
				continue
			}
			// A bare ESC ends the OSC and starts a new escape sequence, as
			// in a terminal. The mark is dropped; the ESC is reprocessed.
			p.endMark(fn, false)
			p.st, p.n, p.intro[0] = stIntro, 1, esc
			escAt = -1
		}
	}

	switch p.st {
	case stGround:
		emit(b[start:])
	case stIntro:
		// The introducer is saved in p.intro; pass on what came before.
		enterMark()
	}
}

// introNext reports whether c, following n matched introducer bytes,
// still matches "ESC]133" or "ESC]633".
func introNext(n int, c byte) bool {
	switch n {
	case 1:
		return c == ']'
	case 2:
		return c == '1' || c == '6'
	case 3, 4:
		return c == '3'
	}
	return false
}

// endsMark reports whether c ends the payload of a mark.
func endsMark(c byte) bool {
	return c == bel || c == esc || c == can || c == sub
}

func (p *Parser) appendBody(d []byte) {
	if p.over || len(d) == 0 {
		return
	}
	if len(p.body)+len(d) > maxMark {
		p.over = true
		p.forged++
		p.body = p.body[:0]
		return
	}
	p.body = append(p.body, d...)
}

// endMark finishes the current mark. complete is false when it was
// aborted rather than properly terminated.
func (p *Parser) endMark(fn func(Item), complete bool) {
	switch {
	case p.over:
		// Already counted.
	case !complete:
		p.forged++
	default:
		ev, ok := p.parse(p.intro[2], p.body)
		if !ok {
			p.forged++
		} else if ev != nil {
			fn(Item{Event: ev})
		}
	}
	p.over = false
	if cap(p.body) > keepBody {
		p.body = nil
	} else {
		p.body = p.body[:0]
	}
}

// parse checks the nonce of a mark's payload and decodes it. It returns
// ok false for an untrusted or malformed mark, and a nil event for a
// trusted mark of an unknown letter. code is '1' for 133 and '6' for 633.
func (p *Parser) parse(code byte, body []byte) (ev *Event, ok bool) {
	i := bytes.LastIndexByte(body, ';')
	if i < 0 || len(p.nonce) == 0 {
		return nil, false
	}
	last := body[i+1:]
	if !bytes.HasPrefix(last, []byte("n=")) ||
		subtle.ConstantTimeCompare(last[2:], p.nonce) != 1 {
		return nil, false
	}
	f := strings.Split(string(body[:i]), ";")
	args := f[1:]

	switch code {
	case '1':
		switch f[0] {
		case "A", "B", "C":
			if len(args) != 0 {
				return nil, false
			}
			k := PromptStart
			switch f[0] {
			case "B":
				k = InputStart
			case "C":
				k = CommandStart
			}
			return &Event{Kind: k}, true
		case "D":
			if len(args) > 1 {
				return nil, false
			}
			ev := &Event{Kind: CommandEnd}
			if len(args) == 1 {
				if n, err := strconv.Atoi(args[0]); err == nil {
					ev.Exit, ev.HasExit = n, true
				}
			}
			return ev, true
		}
	case '6':
		switch f[0] {
		case "E":
			if len(args) != 1 {
				return nil, false
			}
			s, err := Unescape(args[0])
			if err != nil {
				return nil, false
			}
			return &Event{Kind: CommandLine, Text: s}, true
		case "P":
			if len(args) != 1 || !strings.HasPrefix(args[0], "Cwd=") {
				return nil, false
			}
			s, err := Unescape(args[0][len("Cwd="):])
			if err != nil {
				return nil, false
			}
			return &Event{Kind: Cwd, Text: s}, true
		case "X":
			return parsePrivate(args)
		}
	}
	return nil, true
}

// parsePrivate decodes the arguments of a 633;X mark: NAME[;K=V...].
func parsePrivate(args []string) (*Event, bool) {
	if len(args) == 0 || args[0] == "" {
		return nil, false
	}
	name, err := Unescape(args[0])
	if err != nil {
		return nil, false
	}
	ev := &Event{Kind: Private, Text: name}
	for _, a := range args[1:] {
		k, v, _ := strings.Cut(a, "=")
		if k, err = Unescape(k); err != nil {
			return nil, false
		}
		if v, err = Unescape(v); err != nil {
			return nil, false
		}
		if ev.Fields == nil {
			ev.Fields = make(map[string]string, len(args)-1)
		}
		ev.Fields[k] = v
	}
	return ev, true
}

// Mark builds a mark from already escaped fields, appending the nonce
// field: Mark(n, "133", "D", "3") is "ESC]133;D;3;n=<n> BEL". The shell
// engine and tests use it so the wire format lives in one place.
func Mark(nonce string, fields ...string) []byte {
	b := make([]byte, 0, 16+len(nonce)+8*len(fields))
	b = append(b, esc, ']')
	for _, f := range fields {
		b = append(b, f...)
		b = append(b, ';')
	}
	b = append(b, "n="...)
	b = append(b, nonce...)
	return append(b, bel)
}

// needsEscape reports whether c must be written as \xNN in escaped text.
func needsEscape(c byte) bool {
	return c == ';' || c < 0x20 || c == 0x7f
}

// Escape encodes s for a mark field: a backslash becomes "\\" and ';',
// control bytes and DEL become "\xNN". Everything else, UTF-8 included,
// is kept, so escaped text stays readable.
func Escape(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			n++
		case needsEscape(c):
			n += 3
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(len(s) + n)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			sb.WriteString(`\\`)
		case needsEscape(c):
			sb.WriteString(`\x`)
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xf])
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// Unescape decodes text written by Escape. Only a dangling or unknown
// escape or bad hex digits are errors, so a garbled mark is noticed rather
// than misread. Raw bytes are kept as they are, whether or not Escape
// would have escaped them: the shell integration's escaper may encode
// fewer bytes than Escape does.
func Unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c != '\\':
			sb.WriteByte(c)
		case i+1 < len(s) && s[i+1] == '\\':
			sb.WriteByte('\\')
			i++
		case i+3 < len(s) && s[i+1] == 'x':
			hi, ok1 := unhex(s[i+2])
			lo, ok2 := unhex(s[i+3])
			if !ok1 || !ok2 {
				return "", fmt.Errorf("term: bad hex escape at offset %d", i)
			}
			sb.WriteByte(hi<<4 | lo)
			i += 3
		default:
			return "", fmt.Errorf("term: bad escape at offset %d", i)
		}
	}
	return sb.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
