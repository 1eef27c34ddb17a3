package term

import (
	"bytes"
	"sync"
)

// Ring is a bounded scrollback: it keeps the last bytes of a terminal's
// output so a viewer who connects late can be shown recent history
// without the session holding everything ever printed.
//
// A Ring is safe for concurrent use.
type Ring struct {
	mu      sync.Mutex
	max     int
	buf     []byte // grows to max, then wraps
	start   int    // index of the oldest byte once buf is full
	dropped int64
}

// NewRing returns a Ring that holds at most limit bytes. With limit <= 0
// it holds nothing.
func NewRing(limit int) *Ring {
	return &Ring{max: max(limit, 0)}
}

// Write appends p, dropping the oldest bytes beyond the limit. It never
// fails.
func (r *Ring) Write(p []byte) (int, error) {
	n := len(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n >= r.max {
		// p alone fills the ring.
		r.dropped += int64(len(r.buf) + n - r.max)
		r.buf = append(r.buf[:0], p[n-r.max:]...)
		r.start = 0
		return n, nil
	}
	if room := r.max - len(r.buf); room > 0 {
		k := min(room, len(p))
		r.buf = append(r.buf, p[:k]...)
		p = p[k:]
	}
	// The ring is full: overwrite the oldest bytes.
	r.dropped += int64(len(p))
	for len(p) > 0 {
		k := copy(r.buf[r.start:], p)
		p = p[k:]
		r.start = (r.start + k) % r.max
	}
	return n, nil
}

// Snapshot returns a copy of the held bytes, oldest first. Once bytes have
// been dropped, the held data may begin inside an escape sequence or a
// UTF-8 character, so the snapshot then starts after the first newline,
// unless there is none.
func (r *Ring) Snapshot() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	head, tail := r.buf[r.start:], r.buf[:r.start]
	if r.dropped > 0 {
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			head = head[i+1:]
		} else if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			head, tail = nil, tail[i+1:]
		}
	}
	out := make([]byte, 0, len(head)+len(tail))
	out = append(out, head...)
	return append(out, tail...)
}

// Len returns how many bytes the ring holds.
func (r *Ring) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buf)
}

// Dropped returns how many bytes have been dropped to stay within the
// limit, so callers can tell that a snapshot is not the whole history.
func (r *Ring) Dropped() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// End returns the offset just past the last byte ever written: where a
// reader that has seen everything so far continues.
func (r *Ring) End() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped + int64(len(r.buf))
}

// ReadAt copies into dst the bytes that were written at offset off and
// after, and returns how many it copied. ok is false when bytes at off were
// already dropped: a reader that fell that far behind has lost output.
// Many readers can share one Ring, each with its own offset.
func (r *Ring) ReadAt(dst []byte, off int64) (n int, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := off - r.dropped
	if i < 0 {
		return 0, false
	}
	if i >= int64(len(r.buf)) {
		return 0, true
	}
	for n < len(dst) && i < int64(len(r.buf)) {
		pos := (r.start + int(i)) % len(r.buf)
		end := len(r.buf)
		if pos < r.start {
			end = r.start
		}
		k := copy(dst[n:], r.buf[pos:end])
		n += k
		i += int64(k)
	}
	return n, true
}
