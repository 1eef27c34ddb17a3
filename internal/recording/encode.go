package recording

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/jsonstr"
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
	dst = jsonstr.Append(dst, data)
	return append(dst, ']', '\n')
}
