package mcp

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"
)

// How a stream's bytes become a reply's text. Inline output is for an
// agent to read, so it is text wherever the bytes are mostly text: each
// byte that is not valid UTF-8 shows as U+FFFD (the reply says so with
// <field>Lossy), and a progress bar's redraws show as the frame last
// drawn (<field>FramesCollapsed). Only output that is mostly binary comes
// as base64 (<field>Encoding). The stream itself stays exact: the exact
// bytes are one ssh_read_output call away.

// binaryShare: bytes are mostly binary when they hold a NUL byte or more
// than one byte in binaryShare is not text.
const binaryShare = 4

// lineSnap is how far a cut head or tail moves to end, or start, on a
// line boundary.
const lineSnap = 1 << 10

// piece is one output string of a reply, as it is sent.
type piece struct {
	text   string
	base64 bool // text is the exact bytes, base64-encoded
	lossy  bool // bytes that are not UTF-8 were replaced by U+FFFD
	frames int  // progress redraws dropped (collapseFrames)
	raw    int  // how many bytes of the stream it stands for
	cost   int  // its JSON length, without the quotes
}

// put sets field name of r to the piece and the flags that qualify it.
func (pc piece) put(r reply, name string) {
	r[name] = pc.text
	if pc.base64 {
		r[name+"Encoding"] = "base64"
	}
	if pc.lossy {
		r[name+"Lossy"] = true
	}
	if pc.frames > 0 {
		r[name+"FramesCollapsed"] = pc.frames
	}
}

// render is how b is sent inline: base64 when it is mostly binary, else
// text with its redraws collapsed and invalid bytes replaced.
func render(b []byte) piece {
	if mostlyBinary(b) {
		return binaryPiece(b)
	}
	return textPiece(b)
}

func binaryPiece(b []byte) piece {
	s := base64.StdEncoding.EncodeToString(b)
	return piece{text: s, base64: true, raw: len(b), cost: len(s)}
}

// textPiece is b as text, whatever it holds.
func textPiece(b []byte) piece {
	c, frames := collapseFrames(b)
	t, replaced := validText(c)
	return piece{text: string(t), lossy: replaced > 0, frames: frames, raw: len(b), cost: jsonCost(t)}
}

// textControl marks the control characters that terminal text is made
// of: backspace, tab, line feed, vertical tab, form feed, carriage return
// and escape (colours).
func textControl(c byte) bool {
	return c == '\b' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r' || c == 0x1b
}

// mostlyBinary reports whether b is better sent as base64: it holds a
// NUL byte, or more than a quarter of its bytes are not text (not part of
// valid UTF-8, or control characters other than textControl's).
func mostlyBinary(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	bad := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				bad++
			}
			i += n
			continue
		}
		if (c < 0x20 && !textControl(c)) || c == 0x7f {
			bad++
		}
		i++
	}
	return bad*binaryShare > len(b)
}

// validText returns b with each byte that is not part of valid UTF-8
// replaced by U+FFFD, and how many were (b itself when none).
func validText(b []byte) ([]byte, int) {
	if utf8.Valid(b) {
		return b, 0
	}
	out := make([]byte, 0, len(b)+len(b)/4)
	n := 0
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
			n++
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out, n
}

// collapseFrames drops the redraws of progress bars and spinners. A line
// (up to and including '\n', or the text's end) ends in its terminator:
// the '\n' and the carriage returns just before it, or the carriage
// returns that end the text. Any other carriage return in it starts a new
// frame, drawn over the one before; the line becomes the frame last
// shown, which is the last one that is not empty, and its terminator.
// frames counts the frames dropped.
func collapseFrames(b []byte) (out []byte, frames int) {
	if !hasFrameCR(b) {
		return b, 0
	}
	out = make([]byte, 0, len(b))
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		content := bytes.TrimRight(bytes.TrimSuffix(line, []byte("\n")), "\r")
		n := bytes.Count(content, []byte("\r"))
		if n == 0 {
			out = append(out, line...)
			continue
		}
		frames += n
		end := len(content)
		for {
			i := bytes.LastIndexByte(content[:end], '\r')
			if i < 0 || i+1 < end {
				out = append(out, content[i+1:end]...)
				break
			}
			end = i
		}
		out = append(out, line[len(content):]...)
	}
	return out, frames
}

// hasFrameCR reports whether b has a carriage return that starts a frame
// (collapseFrames): one whose run of carriage returns is followed by
// something other than '\n'.
func hasFrameCR(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\r')
		if j < 0 {
			return false
		}
		i += j
		for i < len(b) && b[i] == '\r' {
			i++
		}
		if i == len(b) {
			return false
		}
		if b[i] != '\n' {
			return true
		}
	}
}

// frameScanChunk is how much of a stream hasFrames reads at a time.
const frameScanChunk = 64 << 10

// hasFrames is hasFrameCR over the first size bytes of a stream, read a
// chunk at a time.
func hasFrames(f capture, size int64) bool {
	buf := make([]byte, frameScanChunk)
	inRun := false // the bytes before ended in a run of '\r'
	for off := int64(0); off < size; {
		n, _ := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n <= 0 {
			return false
		}
		off += int64(n)
		b := buf[:n]
		if inRun {
			i := 0
			for i < len(b) && b[i] == '\r' {
				i++
			}
			if i == len(b) {
				continue
			}
			if b[i] != '\n' {
				return true
			}
			inRun = false
		}
		if hasFrameCR(b) {
			return true
		}
		inRun = b[len(b)-1] == '\r'
	}
	return false
}

// snapHead moves a head cut at n (of the stream's first bytes b) back to
// just after a '\n', when one lies within lineSnap bytes: a head ends on
// a whole line.
func snapHead(b []byte, n int) int {
	if n <= 0 || b[n-1] == '\n' {
		return n
	}
	from := max(0, n-lineSnap)
	if i := bytes.LastIndexByte(b[from:n], '\n'); i >= 0 {
		return from + i + 1
	}
	return n
}

// snapTail moves a tail cut at st (of the stream's last bytes b) forward
// to just after a '\n', when one lies within lineSnap bytes and something
// follows it: a tail starts on a whole line. newline tells whether the
// byte before b is a '\n'.
func snapTail(b []byte, st int, newline bool) int {
	if st >= len(b) || (st == 0 && newline) || (st > 0 && b[st-1] == '\n') {
		return st
	}
	if i := bytes.IndexByte(b[st:min(len(b), st+lineSnap)], '\n'); i >= 0 && st+i+1 < len(b) {
		return st + i + 1
	}
	return st
}
