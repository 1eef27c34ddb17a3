package redact

import (
	"fmt"
	"io"
	"maps"
	"sync"
	"unicode/utf8"
)

// maxKeptBuf bounds the buffers a Stream keeps for reuse across Flush.
const maxKeptBuf = 1 << 20

// Stream redacts a byte stream that arrives in pieces, such as the reads
// of a PTY, and writes the result to an io.Writer. A secret split across
// writes is still found: the Stream holds back text that could be the
// start of a secret until more arrives, and releases at once text that
// cannot, so that a program waiting at a prompt has its prompt seen. It
// holds at most a rule's window (see the package doc; a literal's is its
// length) plus an incomplete UTF-8 rune, and of valid UTF-8 it never
// splits a rune across the writes it makes.
//
// The output of any sequence of Writes followed by Flush equals
// Redactor.Bytes of their concatenation. A Stream is safe for concurrent
// use.
type Stream struct {
	r *Redactor
	m *matcher // r's, as of when the stream last held nothing back
	w io.Writer

	mu sync.Mutex
	// buf is text not yet written, after text kept for rules that began
	// earlier and one byte of context.
	buf     []byte
	from    int // buf[:from] is context: rules begin in buf[from:]
	emitted int // buf[:emitted] has been written
	off     int // the entropy chunk position of buf[from]
	spans   []span
	out     []byte
	counts  Counts
	err     error
}

// Stream returns a Stream writing the redacted stream to w.
func (r *Redactor) Stream(w io.Writer) *Stream {
	return &Stream{r: r, m: r.cur.Load(), w: w}
}

// Write redacts p as the continuation of the stream, writing what is
// decided and holding back what is not. After an error from the
// underlying writer, every call returns that error.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	if m := s.r.cur.Load(); m != s.m && s.emitted == len(s.buf) {
		// The Redactor was refreshed, and nothing is held back: go on
		// with what it finds now (the byte of context goes too).
		s.m, s.buf, s.from, s.emitted, s.off = m, s.buf[:0], 0, 0, 0
	}
	s.buf = append(s.buf, p...)
	if err := s.emit(false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush redacts and writes everything held back, taking the stream to be
// complete: a token at its very end is judged as it stands. Call it when a
// command ends. The next Write starts a new stream.
func (s *Stream) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return s.emit(true)
}

// Counts returns how many markers of each kind the stream has written.
func (s *Stream) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}

// emit writes what is decided of buf (all of it if eof), then drops from
// buf what no rule needs any more.
func (s *Stream) emit(eof bool) error {
	text := s.buf
	spans, pd := s.m.scan(text, s.from, s.off, eof, s.spans[:0])
	s.spans = spans
	end := len(text)
	if !eof {
		end = min(pd.hold, completeRunes(text))
		// A decided match that crosses end waits with it.
		for moved := true; moved; {
			moved = false
			for _, sp := range spans {
				if sp.start < end && end < sp.end {
					end, moved = sp.start, true
				}
			}
		}
	}
	if err := s.write(text, end, spans); err != nil {
		return err
	}
	if eof {
		s.buf, s.from, s.emitted, s.off = s.buf[:0], 0, 0, 0
		if cap(s.buf) > maxKeptBuf {
			s.buf, s.out = nil, nil // after one huge write, do not keep its memory
		}
		return nil
	}
	// Keep text from the first rule still undecided or still to be
	// written, and the byte before it.
	keep := min(pd.q, end)
	for _, sp := range spans {
		if sp.end > end {
			keep = min(keep, sp.q)
		}
	}
	cut := keep - 1
	if cut <= 0 || keep <= s.from {
		return nil
	}
	if s.m.entropy {
		s.off = s.m.entropyOffset(text, s.from, s.off, keep)
	}
	s.buf = text[:copy(text, text[cut:])]
	s.from, s.emitted = 1, s.emitted-cut
	return nil
}

// write writes text[s.emitted:end], redacted.
func (s *Stream) write(text []byte, end int, spans []span) error {
	if end <= s.emitted {
		return nil
	}
	chunk := text[s.emitted:end]
	if len(spans) > 0 {
		s.out, s.counts = render(s.out[:0], text, s.emitted, end, spans, s.counts)
		chunk = s.out
	}
	s.emitted = end
	if _, err := s.w.Write(chunk); err != nil {
		s.err = fmt.Errorf("redact: write: %w", err)
		return s.err
	}
	return nil
}

// completeRunes returns the length of text without an incomplete UTF-8
// rune at its end.
func completeRunes(text []byte) int {
	for k := len(text) - 1; k >= 0 && k >= len(text)-utf8.UTFMax; k-- {
		if utf8.RuneStart(text[k]) {
			if utf8.FullRune(text[k:]) {
				return len(text)
			}
			return k
		}
	}
	return len(text)
}
