package term

import (
	"io"
	"strings"
)

type plainState uint8

const (
	plGround    plainState = iota // text
	plEsc                         // after ESC
	plEscInter                    // after ESC and intermediate bytes
	plCSI                         // in ESC [ ... before the final byte
	plString                      // in an OSC, DCS, SOS, PM or APC string
	plStringEsc                   // in such a string, right after an ESC
)

// Plain strips ANSI escape sequences from a stream, leaving the text a
// person would read: what an agent wants instead of raw terminal output.
// It removes CSI, OSC, DCS, SOS, PM and APC sequences and other escape
// sequences, drops BEL and turns CR LF into LF. A lone CR and all other
// bytes (UTF-8, tabs, backspaces) pass through. The 8-bit C1 controls are
// not interpreted, since their bytes occur inside UTF-8 characters.
// Sequences may be split across Write calls.
//
// A Plain is not safe for concurrent use.
type Plain struct {
	w   io.Writer
	st  plainState
	osc bool // the current string is an OSC, which BEL also ends
	cr  bool // a CR is held back to see whether LF follows
	out []byte
	err error
}

// NewPlain returns a Plain that writes the stripped text to w.
func NewPlain(w io.Writer) *Plain {
	return &Plain{w: w}
}

// Write strips p and writes the text to the underlying writer. A CR at the
// end of p is held back until the next Write or Flush. After the
// underlying writer fails, Write returns that error without writing.
func (pl *Plain) Write(p []byte) (int, error) {
	if pl.err != nil {
		return 0, pl.err
	}
	pl.out = pl.out[:0]
	for i := 0; i < len(p); {
		c := p[i]
		switch pl.st {
		case plGround:
			j := i
			for j < len(p) && p[j] != esc && p[j] != bel && p[j] != '\r' {
				j++
			}
			if j > i {
				pl.text(p[i:j])
				i = j
				continue
			}
			switch c {
			case esc:
				pl.st = plEsc
			case '\r':
				pl.carriageReturn()
			}
			i++

		case plEsc:
			switch {
			case c == '[':
				pl.st = plCSI
			case c == ']':
				pl.st, pl.osc = plString, true
			case c == 'P' || c == 'X' || c == '^' || c == '_':
				pl.st, pl.osc = plString, false
			case 0x20 <= c && c <= 0x2f:
				pl.st = plEscInter
			case 0x30 <= c && c <= 0x7e:
				pl.st = plGround
			default:
				if !pl.inSequence(c) {
					continue
				}
			}
			i++

		case plEscInter:
			switch {
			case 0x20 <= c && c <= 0x2f:
			case 0x30 <= c && c <= 0x7e:
				pl.st = plGround
			default:
				if !pl.inSequence(c) {
					continue
				}
			}
			i++

		case plCSI:
			switch {
			case 0x20 <= c && c <= 0x3f:
			case 0x40 <= c && c <= 0x7e:
				pl.st = plGround
			default:
				if !pl.inSequence(c) {
					continue
				}
			}
			i++

		case plString:
			switch {
			case c == esc:
				pl.st = plStringEsc
			case c == can || c == sub || c == bel && pl.osc:
				pl.st = plGround
			}
			i++

		case plStringEsc:
			if c == '\\' {
				pl.st = plGround
				i++
				continue
			}
			// A bare ESC ends the string and starts a new sequence.
			pl.st = plEsc
		}
	}
	if len(pl.out) == 0 {
		return len(p), nil
	}
	if _, err := pl.w.Write(pl.out); err != nil {
		pl.err = err
		return 0, err
	}
	return len(p), nil
}

// inSequence handles a byte that is neither parameter, intermediate nor
// final inside an escape or control sequence, the way a terminal does:
// ESC restarts, CAN and SUB abort, other C0 controls are executed and DEL
// is ignored. A byte of 0x80 or above ends the sequence; it returns false
// then, and the byte must be handled again as text.
func (pl *Plain) inSequence(c byte) bool {
	switch {
	case c == esc:
		pl.st = plEsc
	case c == can || c == sub:
		pl.st = plGround
	case c == '\r':
		pl.carriageReturn()
	case c == bel || c == 0x7f:
	case c < 0x20:
		pl.text([]byte{c})
	default:
		pl.st = plGround
		return false
	}
	return true
}

// text appends t, which holds no CR, resolving a held CR first.
func (pl *Plain) text(t []byte) {
	if pl.cr {
		pl.cr = false
		if t[0] != '\n' {
			pl.out = append(pl.out, '\r')
		}
	}
	pl.out = append(pl.out, t...)
}

// carriageReturn holds a CR back, releasing one held before it.
func (pl *Plain) carriageReturn() {
	if pl.cr {
		pl.out = append(pl.out, '\r')
	}
	pl.cr = true
}

// Flush writes a held-back CR. Call it at the end of the stream; calling
// it mid-stream only risks a CR LF split by the call staying CR LF.
func (pl *Plain) Flush() error {
	if pl.err != nil || !pl.cr {
		return pl.err
	}
	pl.cr = false
	if _, err := pl.w.Write([]byte{'\r'}); err != nil {
		pl.err = err
	}
	return pl.err
}

// StripString is Plain for a whole string, for callers that already hold
// all the output.
func StripString(s string) string {
	var sb strings.Builder
	pl := NewPlain(&sb)
	pl.Write([]byte(s)) // a strings.Builder never fails
	pl.Flush()
	return sb.String()
}
