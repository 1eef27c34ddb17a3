package term

import "bytes"

// This file holds the two filters that keep a real terminal, the
// operator's under `tandem attach`, from acting for the agent: the
// OutputFilter removes from the session's output what would act on the
// terminal rather than draw on it (queries, titles, clipboard writes,
// colour changes, DCS/APC/PM/SOS strings), and the AnswerFilter removes
// from the terminal's input what a terminal sends as an answer, never as
// a key.

// Limits on how much of one sequence a filter holds before deciding.
const (
	// maxKeptCSI bounds a control sequence the OutputFilter passes; a
	// longer one is dropped whole.
	maxKeptCSI = 512
	// maxKeptOSC bounds an OSC 8 hyperlink the OutputFilter passes; a
	// longer one is dropped whole.
	maxKeptOSC = 8192
	// maxHeldInput bounds what the AnswerFilter holds of an unfinished
	// sequence; past it the bytes are keys after all and go through.
	maxHeldInput = 64 << 10
)

// seqState is where a filter is in the escape-sequence grammar (the
// VT500 parser's states, reduced to what the filters must tell apart).
type seqState uint8

const (
	sqGround seqState = iota
	sqEsc             // after ESC, collecting intermediates
	sqCSI             // after CSI, collecting parameters and intermediates
	sqOSC             // in an OSC string
	sqStr             // in a DCS, SOS, PM or APC string (or screen's ESC k)
	sqStrEsc          // ESC inside an OSC or DCS/SOS/PM/APC string: ST, or an abort
)

// OutputFilter removes from a terminal byte stream the sequences that act
// on the terminal rather than draw on it, so a program in the session
// cannot make the operator's terminal answer (and so type), retitle it,
// write its clipboard, recolour it, resize it or talk to a multiplexer
// around it. It keeps text, C0 controls, SGR, cursor motion, erasing,
// scrolling regions, the alternate screen, modes (bracketed paste, mouse
// reporting) and OSC 8 hyperlinks.
//
// Removed: every DCS, SOS, PM and APC string (DECRQSS, XTGETTCAP, sixel,
// tmux passthrough, kitty graphics) and screen's window-name string (ESC k
// … ST); every OSC but 8 (titles 0-2, 4-19 and 104-119 colours and their
// queries, 7, 9, 52 clipboard, 777, 1337);
// CSI queries and reports (DSR n, DA c, DECRQM $p, XTVERSION >q,
// DECREQTPARM x, DECRQCRA *y, XTWINOPS t, media copy i); every CSI with a
// '<', '=' or '>' prefix (xterm and kitty settings and queries); CSI ? with
// a final other than h, l, r, s, J, K, W; focus and colour-scheme
// reporting (?1004, ?2031); ESC Z (DECID) and ESC SP (S7C1T/S8C1T). A C1
// control, 8-bit or UTF-8 encoded, counts as its ESC form. An incomplete
// or aborted sequence is dropped, never passed in part.
//
// It is a streaming filter: a sequence may be split across calls. The zero
// value is ready. It is not safe for concurrent use.
type OutputFilter struct {
	p     seqParser
	kind  seqState // the sequence being collected: sqEsc, sqCSI, sqOSC or sqStr
	intro int      // the length of its introducer in buf
	buf   []byte   // the sequence being collected, raw
	drop  bool     // the sequence being collected is dropped
}

// Write filters p and appends what the terminal may see to dst.
func (f *OutputFilter) Write(dst, p []byte) []byte {
	f.p.titles = true
	for _, b := range p {
		dst = f.p.feed(b, dst, f)
	}
	return dst
}

// seqParser splits a byte stream into UTF-8 characters, C0 and C1
// controls and sequences, for one of the filters.
type seqParser struct {
	// titles makes ESC k start a string, as screen and tmux read it (the
	// window name, up to ST); elsewhere ESC k is Alt-k.
	titles bool
	st     seqState
	inter  bool    // sqEsc: intermediates seen
	utf    [4]byte // an unfinished UTF-8 character
	nutf   int
	need   int // continuation bytes the character still needs
}

// sink is the filter a seqParser reports to.
type sink interface {
	// start begins a sequence; intro is its introducer, raw.
	start(dst []byte, kind seqState, intro []byte) []byte
	// add appends a byte to the sequence.
	add(dst []byte, b byte) []byte
	// end finishes the sequence with its final bytes.
	end(dst []byte, final []byte) []byte
	// abort discards the sequence.
	abort(dst []byte) []byte
	// text passes bytes outside any sequence.
	text(dst []byte, raw []byte) []byte
}

// feed takes one byte. UTF-8 is decoded first, so that a C1 control
// encoded as U+0080..U+009F counts as that control and a continuation byte
// is never mistaken for one.
func (p *seqParser) feed(b byte, dst []byte, s sink) []byte {
	if p.need > 0 {
		if b >= 0x80 && b <= 0xbf {
			if p.nutf == 1 && p.utf[0] == 0xc2 && b <= 0x9f {
				p.need, p.nutf = 0, 0
				return p.c1(b, []byte{0xc2, b}, dst, s)
			}
			p.utf[p.nutf] = b
			p.nutf++
			p.need--
			if p.need == 0 {
				raw := p.utf[:p.nutf]
				p.nutf = 0
				return p.char(raw, dst, s)
			}
			return dst
		}
		// Not a continuation: the bytes held are an invalid character.
		raw := append([]byte(nil), p.utf[:p.nutf]...)
		p.need, p.nutf = 0, 0
		dst = p.char(raw, dst, s)
	}
	switch {
	case b < 0x80:
		return p.ascii(b, dst, s)
	case b <= 0x9f:
		return p.c1(b, []byte{b}, dst, s)
	case b >= 0xc2 && b <= 0xdf:
		p.utf[0], p.nutf, p.need = b, 1, 1
	case b >= 0xe0 && b <= 0xef:
		p.utf[0], p.nutf, p.need = b, 1, 2
	case b >= 0xf0 && b <= 0xf4:
		p.utf[0], p.nutf, p.need = b, 1, 3
	default: // 0xa0-0xbf alone, 0xc0, 0xc1, 0xf5-0xff: invalid, shown as such
		return p.char([]byte{b}, dst, s)
	}
	return dst
}

// char takes a character that is not a control (or invalid bytes).
func (p *seqParser) char(raw []byte, dst []byte, s sink) []byte {
	switch p.st {
	case sqGround:
		return s.text(dst, raw)
	case sqOSC, sqStr:
		for _, b := range raw {
			dst = s.add(dst, b)
		}
		return dst
	case sqStrEsc:
		p.st = sqGround
		return s.text(p.abortStrEsc(dst, s), raw)
	default: // in ESC or CSI: not part of any sequence; the sequence is aborted
		p.st = sqGround
		dst = s.abort(dst)
		return s.text(dst, raw)
	}
}

// c1 takes a C1 control, raw as it came (one byte, or two in UTF-8).
func (p *seqParser) c1(c byte, raw []byte, dst []byte, s sink) []byte {
	switch p.st {
	case sqOSC, sqStr:
		if c == 0x9c { // ST
			p.st = sqGround
			return s.end(dst, raw)
		}
		dst = s.abort(dst)
	case sqStrEsc:
		dst = p.abortStrEsc(dst, s)
	case sqEsc, sqCSI:
		dst = s.abort(dst)
	}
	p.st = sqGround
	return p.introduce(c-0x40, raw, dst, s)
}

// abortStrEsc aborts a string at an ESC that is not its ST, and then the
// escape that ESC began, which is followed by no sequence.
func (p *seqParser) abortStrEsc(dst []byte, s sink) []byte {
	dst = s.abort(dst)
	dst = s.start(dst, sqEsc, []byte{0x1b})
	return s.abort(dst)
}

// introduce starts what ESC x (or its C1 form, raw) starts. x is the
// byte after ESC.
func (p *seqParser) introduce(x byte, raw []byte, dst []byte, s sink) []byte {
	switch x {
	case '[':
		p.st = sqCSI
	case ']':
		p.st = sqOSC
	case 'P', 'X', '^', '_':
		p.st = sqStr
	default:
		// Any other C1 control in ground (NEL, IND, HTS, DECID as 0x9a…)
		// is a one-byte sequence: start and end it at once.
		p.st = sqGround
		dst = s.start(dst, sqEsc, raw[:len(raw)-1])
		return s.end(dst, raw[len(raw)-1:])
	}
	return s.start(dst, p.st, raw)
}

// ascii takes a 7-bit byte.
func (p *seqParser) ascii(b byte, dst []byte, s sink) []byte {
	const esc, can, sub, bel = 0x1b, 0x18, 0x1a, 0x07
	switch p.st {
	case sqGround:
		if b == esc {
			p.st, p.inter = sqEsc, false
			return s.start(dst, sqEsc, []byte{esc})
		}
		return s.text(dst, []byte{b})
	case sqEsc:
		switch {
		case b == esc:
			p.inter = false
			dst = s.abort(dst)
			return s.start(dst, sqEsc, []byte{esc})
		case b < 0x20 || b == 0x7f:
			p.st = sqGround
			dst = s.abort(dst)
			return s.text(dst, []byte{b})
		case b < 0x30: // intermediate
			p.inter = true
			return s.add(dst, b)
		case !p.inter && (b == '[' || b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_' || b == 'k' && p.titles):
			switch b {
			case '[':
				p.st = sqCSI
			case ']':
				p.st = sqOSC
			default:
				p.st = sqStr
			}
			return s.start(dst, p.st, []byte{esc, b})
		default:
			p.st = sqGround
			return s.end(dst, []byte{b})
		}
	case sqCSI:
		switch {
		case b == esc:
			p.st, p.inter = sqEsc, false
			dst = s.abort(dst)
			return s.start(dst, sqEsc, []byte{esc})
		case b < 0x20 || b == 0x7f:
			p.st = sqGround
			dst = s.abort(dst)
			return s.text(dst, []byte{b})
		case b < 0x40:
			return s.add(dst, b)
		default:
			p.st = sqGround
			return s.end(dst, []byte{b})
		}
	case sqOSC, sqStr:
		switch b {
		case esc:
			p.st = sqStrEsc
			return dst
		case bel:
			if p.st == sqOSC {
				p.st = sqGround
				return s.end(dst, []byte{bel})
			}
			return s.add(dst, b)
		case can, sub:
			p.st = sqGround
			dst = s.abort(dst)
			return s.text(dst, []byte{b})
		}
		return s.add(dst, b)
	default: // sqStrEsc
		if b == '\\' {
			p.st = sqGround
			return s.end(dst, []byte{esc, '\\'})
		}
		// The ESC aborted the string and starts an escape of its own.
		dst = s.abort(dst)
		p.st, p.inter = sqEsc, false
		dst = s.start(dst, sqEsc, []byte{esc})
		return p.ascii(b, dst, s)
	}
}

// pending reports whether the parser is inside a sequence or a character.
func (p *seqParser) pending() bool { return p.st != sqGround || p.need > 0 }

// OutputFilter's sink: it collects a sequence in buf and decides at its end.

func (f *OutputFilter) start(dst []byte, kind seqState, intro []byte) []byte {
	f.kind, f.intro = kind, len(intro)
	f.buf = append(f.buf[:0], intro...)
	f.drop = kind == sqStr
	return dst
}

func (f *OutputFilter) add(dst []byte, b byte) []byte {
	switch f.kind {
	case sqStr:
		return dst // dropped whole; nothing to keep
	case sqOSC:
		if !f.drop && (len(f.buf) >= maxKeptOSC || len(f.buf) == f.intro && b != '8' || len(f.buf) == f.intro+1 && b != ';') {
			f.drop = true
		}
	default:
		if !f.drop && len(f.buf) >= maxKeptCSI {
			f.drop = true
		}
	}
	if f.drop {
		f.buf = f.buf[:0]
		return dst
	}
	f.buf = append(f.buf, b)
	return dst
}

func (f *OutputFilter) end(dst []byte, final []byte) []byte {
	if f.drop {
		f.buf, f.drop = f.buf[:0], false
		return dst
	}
	seq := append(f.buf, final...)
	f.buf = seq[:0]
	if f.keep(seq[:f.intro], seq[f.intro:len(seq)-len(final)], final) {
		dst = append(dst, seq...)
	}
	return dst
}

func (f *OutputFilter) abort(dst []byte) []byte {
	f.buf, f.drop = f.buf[:0], false
	return dst
}

func (f *OutputFilter) text(dst []byte, raw []byte) []byte { return append(dst, raw...) }

// keep decides on a whole sequence: its introducer, what lies between
// that and its final bytes, and those, all raw.
func (f *OutputFilter) keep(intro, body, final []byte) bool {
	switch f.kind {
	case sqOSC:
		return bytes.HasPrefix(body, []byte("8;")) // exactly OSC 8, no "08"
	case sqStr:
		return false
	case sqCSI:
		return keepCSI(body, final[len(final)-1])
	}
	// An escape sequence, or a C1 control alone.
	if len(intro) != 1 || intro[0] != 0x1b || len(final) != 1 {
		// A C1 control in ground (NEL, IND, HTS, RI, SS2, SS3, DECID as
		// 0x9a, ST…) has no business in the output and no program writes
		// one; an ST alone ends nothing.
		return false
	}
	if len(body) == 0 {
		// ESC Z (DECID) answers like DA; ESC \ (ST) alone ends nothing.
		// ESC 7/8, ESC =/>, ESC M, ESC c pass.
		return final[0] != 'Z' && final[0] != '\\'
	}
	// ESC SP: S7C1T, S8C1T (8-bit answers), conformance levels. ESC %:
	// leaving UTF-8, after which a continuation byte would be a C1
	// control. Charsets (ESC ( 0 …) and ESC # 8 pass.
	return body[0] != ' ' && body[0] != '%'
}

// keepCSI decides on a control sequence by its parameters and
// intermediates (body) and its final byte.
func keepCSI(body []byte, final byte) bool {
	var prefix byte
	if len(body) > 0 && body[0] >= '<' && body[0] <= '?' {
		prefix = body[0]
	}
	var inter []byte
	for i := len(body); i > 0 && body[i-1] >= 0x20 && body[i-1] < 0x30; i-- {
		inter = body[i-1:]
	}
	switch prefix {
	case '<', '=', '>':
		return false
	case '?':
		if len(inter) != 0 {
			return false // DECRQM and the like
		}
		switch final {
		case 'h', 'l':
			return !hasParam(body[1:], 1004) && !hasParam(body[1:], 2031)
		case 'r', 's', 'J', 'K', 'W':
			return true
		}
		return false
	}
	switch len(inter) {
	case 0:
		switch final {
		case 'n', 'c', 't', 'x', 'i':
			return false
		}
	case 1:
		switch {
		case inter[0] == '$' && (final == 'p' || final == 'w' || final == 'u' || final == '|'):
			return false
		case inter[0] == '*' && (final == 'y' || final == '|'):
			return false
		case inter[0] == ' ' && final == 't':
			return false
		}
	}
	return true
}

// hasParam reports whether the ';'-separated parameters in p hold n.
func hasParam(p []byte, n int) bool {
	v, digits := 0, false
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == ';' || p[i] == ':' {
			if digits && v == n {
				return true
			}
			v, digits = 0, false
			continue
		}
		if p[i] >= '0' && p[i] <= '9' {
			if v < 1e6 {
				v = v*10 + int(p[i]-'0')
			}
			digits = true
		}
	}
	return false
}

// AnswerFilter removes from a terminal's input what the terminal sends as
// an answer to a query, never as a key: cursor position reports (CSI
// row;col R), device attributes (CSI ? … c, CSI > … c), mode reports
// (CSI … $ y), window reports (CSI … t), status reports (CSI … n), focus
// events (CSI I, CSI O), DECREPTPARM (CSI … x), every CSI with a '?', '>'
// or '=' prefix, and every OSC, DCS, SOS, PM and APC string (XTVERSION,
// DECRQSS, XTGETTCAP, colour answers). Keys pass: arrows, function keys
// (a modified F3, CSI 1;m R, is lost to the cursor report it looks like),
// Alt-combinations, bracketed paste, SGR and X10 mouse reports.
//
// A sequence may be split across writes; a terminal writes each answer at
// once, so one still unfinished when input pauses is keys after all (Esc,
// Alt-[, Alt-P): the caller then calls Flush. The zero value is ready. It
// is not safe for concurrent use.
type AnswerFilter struct {
	p       seqParser
	kind    seqState
	intro   int // the length of the introducer in buf
	buf     []byte
	passing bool // the sequence outgrew maxHeldInput: it is keys, passed as it comes
}

// Write filters p and appends the keys in it to dst.
func (f *AnswerFilter) Write(dst, p []byte) []byte {
	for _, b := range p {
		dst = f.p.feed(b, dst, f)
	}
	return dst
}

// Pending reports whether the filter holds the start of a sequence or a
// character that more input would finish.
func (f *AnswerFilter) Pending() bool { return f.p.pending() }

// Flush gives up waiting for the rest of a held sequence: what it holds is
// keys, appended to dst.
func (f *AnswerFilter) Flush(dst []byte) []byte {
	if !f.passing {
		dst = append(dst, f.buf...)
	}
	if f.p.st == sqStrEsc {
		dst = append(dst, 0x1b)
	}
	dst = append(dst, f.p.utf[:f.p.nutf]...)
	f.p = seqParser{}
	f.buf, f.passing = f.buf[:0], false
	return dst
}

func (f *AnswerFilter) start(dst []byte, kind seqState, intro []byte) []byte {
	f.passing = false
	f.kind, f.intro = kind, len(intro)
	f.buf = append(f.buf[:0], intro...)
	return dst
}

func (f *AnswerFilter) add(dst []byte, b byte) []byte {
	if f.passing {
		return append(dst, b)
	}
	if len(f.buf) >= maxHeldInput {
		f.passing = true
		dst = append(dst, f.buf...)
		f.buf = f.buf[:0]
		return append(dst, b)
	}
	f.buf = append(f.buf, b)
	return dst
}

func (f *AnswerFilter) end(dst []byte, final []byte) []byte {
	if f.passing {
		f.passing = false
		return append(dst, final...)
	}
	seq := append(f.buf, final...)
	f.buf = seq[:0]
	if !f.answer(seq, len(seq)-len(final)) {
		dst = append(dst, seq...)
	}
	return dst
}

func (f *AnswerFilter) abort(dst []byte) []byte {
	// An unfinished sequence a key began (Alt-[ then Ctrl-C): keys.
	if !f.passing {
		dst = append(dst, f.buf...)
	}
	f.buf, f.passing = f.buf[:0], false
	return dst
}

func (f *AnswerFilter) text(dst []byte, raw []byte) []byte { return append(dst, raw...) }

// answer reports whether the whole sequence seq, whose final bytes start
// at fin, is a terminal's answer.
func (f *AnswerFilter) answer(seq []byte, fin int) bool {
	switch f.kind {
	case sqOSC, sqStr:
		return true
	case sqCSI:
	default:
		return false // Alt-key, SS3 keys, C1 alone
	}
	body, final := seq[f.intro:fin], seq[len(seq)-1]
	if len(body) > 0 && (body[0] == '?' || body[0] == '>' || body[0] == '=') {
		return true
	}
	if len(body) > 0 && body[0] == '<' {
		return false // SGR mouse
	}
	switch final {
	case 'R':
		return len(body) > 0
	case 'c', 't', 'n', 'x':
		return true
	case 'I', 'O':
		return len(body) == 0
	case 'y':
		return len(body) > 0 && body[len(body)-1] == '$'
	}
	return false
}
