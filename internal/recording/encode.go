package recording

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// splitIncomplete splits b before a trailing UTF-8 sequence that is valid so
// far but not yet complete, which the next chunk of the stream may finish.
// Anything that can never become valid is left in head for replacement.
func splitIncomplete(b []byte) (head, tail []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends b to dst as a JSON string, replacing each byte that
// is not part of valid UTF-8 with U+FFFD. Control characters, '"' and '\\'
// are escaped, as are U+2028 and U+2029 for JavaScript's sake.
func appendString(dst, b []byte) []byte {
	dst = append(dst, '"')
	start := 0 // b[start:i] is plain text not yet copied
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, b[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, b[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

// appendTime appends d as seconds with six decimals. It formats whole
// microseconds rather than a float, so a later d never prints smaller.
func appendTime(dst []byte, d time.Duration) []byte {
	us := d.Microseconds()
	dst = strconv.AppendInt(dst, us/1e6, 10)
	frac := us % 1e6
	dst = append(dst, '.')
	for div := int64(1e5); div > 0; div /= 10 {
		dst = append(dst, byte('0'+frac/div%10))
	}
	return dst
}

// appendEvent appends one event line: [TIME, "CODE", DATA]\n.
func appendEvent(dst []byte, d time.Duration, code byte, data []byte) []byte {
	dst = append(dst, '[')
	dst = appendTime(dst, d)
	dst = append(dst, ',', ' ', '"', code, '"', ',', ' ')
	dst = appendString(dst, data)
	return append(dst, ']', '\n')
}
