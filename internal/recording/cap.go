package recording

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Cap bounds what the recording keeps of the terminal's output and input
// at about n bytes of the cast (their JSON text): past it they are
// dropped, counted in Lost, and one output event in the cast says so, so
// a program that prints without end cannot fill the disk through the
// recording. Markers and resizes are still recorded. n <= 0: no bound.
func (w *Writer) Cap(n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.capBytes = n
}

// overCap reports whether an output or input event at d would pass the
// cap; then it is dropped and counted, and the first leaves the notice.
// w.mu is held.
func (w *Writer) overCap(d time.Duration, code byte, data []byte) bool {
	if w.capBytes <= 0 || (code != 'o' && code != 'i') || w.noting {
		return false
	}
	n := encodedSize(data)
	if w.capKept+n <= w.capBytes {
		w.capKept += n
		return false
	}
	w.lost += int64(len(data))
	if !w.capNoted {
		w.capNoted, w.noting = true, true
		msg := fmt.Sprintf("\r\n[tandem: the recording keeps no more output or input: it holds its limit of %d bytes (limits.recordingBytes)]\r\n", w.capBytes)
		w.add(d, 'o', []byte(msg), true)
		w.noting = false
	}
	return true
}

// encodedSize is about the length of data as a JSON string in the cast:
// a control character is a six-byte escape, a quote or backslash two, a
// byte that is not UTF-8 the three of U+FFFD.
func encodedSize(data []byte) int64 {
	n := int64(len(data))
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c < 0x20:
			n += 5
		case c == '"' || c == '\\':
			n++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				n += 2
			}
			i += size
			continue
		}
		i++
	}
	return n
}
