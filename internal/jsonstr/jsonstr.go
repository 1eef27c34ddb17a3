// Package jsonstr encodes bytes as a JSON string. tandem writes a lot of
// terminal output into JSON (recordings, output read back over MCP), where
// encoding/json's string encoder costs more than the command that printed
// it; this one is about a third faster on such text and escapes no HTML.
package jsonstr

import (
	"slices"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// Append appends b to dst as a JSON string, replacing each byte that
// is not part of valid UTF-8 with U+FFFD. Control characters, '"' and '\\'
// are escaped, as are U+2028 and U+2029 for JavaScript's sake. Terminal
// output ends most lines in CR LF, so that pair is one step: for short
// lines the escapes, not the text, are what the encoding costs.
func Append[T ~string | ~[]byte](dst []byte, b T) []byte {
	dst = slices.Grow(dst, len(b)+len(b)/3+16)
	dst = append(dst, '"')
	start := 0 // b[start:i] is plain text not yet copied
	for i := 0; i < len(b); {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		dst = append(dst, b[start:i]...)
		if c < utf8.RuneSelf {
			switch c {
			case '\r':
				if i+1 < len(b) && b[i+1] == '\n' {
					dst = append(dst, `\r\n`...)
					i++
				} else {
					dst = append(dst, '\\', 'r')
				}
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune([]byte(b[i:min(i+utf8.UTFMax, len(b))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
		default:
			dst = append(dst, b[i:i+size]...)
		}
		i += size
		start = i
	}
	dst = append(dst, b[start:]...)
	return append(dst, '"')
}

// plain marks the bytes Append copies as they are: printable ASCII
// other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
