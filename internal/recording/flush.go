package recording

import (
	"errors"
	"fmt"
	"time"
)

// maxSpare bounds the buffer the flusher keeps for reuse between disk
// writes; a larger one, left by a burst, goes back to the garbage collector.
const maxSpare = 1 << 20

// writeSlice is about how much the flusher encodes before it writes.
const writeSlice = 256 << 10

// The flusher takes a burst of output once it pauses: it waits for no
// event to come for settleQuiet before it encodes, so the recording stays
// out of the way of what it records (a command printing a lot, and an
// agent waiting for that command's end). It waits no longer than
// settleMax after the oldest pending event, nor while Flush or Close
// wait, nor once settleBytes are pending: a flood is written as it comes,
// leaving the limit for a disk that stalls.
const (
	settleQuiet = 2 * time.Millisecond
	settleMax   = 100 * time.Millisecond
	settleBytes = 1 << 20
)

// ErrClosed is returned by [Writer.Flush] after [Writer.Close].
var ErrClosed = errors.New("recording: writer closed")

// Flush waits until every event recorded before the call is written to the
// file (not necessarily synced to the disk), and returns the first write
// error, if any. It is for tests and checkpoints; the writer flushes on its
// own.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing {
		return ErrClosed
	}
	target := w.appended
	w.hurry++
	for w.written < target {
		w.progress.Wait()
	}
	w.hurry--
	if w.err != nil {
		return fmt.Errorf("recording: flush: %w", w.err)
	}
	return nil
}

// Close records what is still held back (an incomplete UTF-8 sequence as
// U+FFFD, the marker of a final gap), waits until everything is written,
// syncs and closes the file. It returns the first error since Create; later
// calls return the same.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		<-w.closed
		return w.closeErr
	}
	if w.err == nil {
		d := w.now()
		for stream, code := range []byte{'o', 'i'} {
			if c := w.carry[stream]; len(c) > 0 {
				w.add(d, code, c, false)
			}
		}
		if w.gap > 0 {
			w.add(d, 'o', nil, true) // the marker alone
		}
	}
	w.carry = [2][]byte{}
	w.closing = true
	w.more.Signal()
	for !w.finished {
		w.progress.Wait()
	}
	err := w.err
	w.mu.Unlock()

	// Outside the lock: a late Output must not wait for the disk's sync.
	if err == nil {
		err = w.dst.Sync()
	}
	if cerr := w.dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		w.closeErr = fmt.Errorf("recording: close: %w", err)
	}
	close(w.closed)
	return w.closeErr
}

// settle returns once pending events should be encoded (see settleQuiet);
// w.mu is held, and released while it waits. A burst that reached
// settleBytes is a flood: until output pauses (see add), events go out as
// they come, with nothing held back.
func (w *Writer) settle() {
	for !w.flood && !w.closing && w.hurry == 0 {
		if w.appended-w.written >= int64(min(settleBytes, w.limit/4)) {
			w.flood = true
			return
		}
		now := time.Since(w.start)
		wait := min(settleQuiet-(now-w.last), settleMax-(now-w.pending[0].d))
		if wait <= 0 {
			return
		}
		w.mu.Unlock()
		time.Sleep(wait)
		w.mu.Lock()
	}
}

// flush runs until Close: it encodes pending events and hands them to the
// disk, a write per batch or per writeSlice of it, without holding the
// lock while it does. After a write fails it discards everything, since
// the file may end in half a line.
func (w *Writer) flush() {
	var buf []byte // encoded events, reused while small
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		for len(w.pending) == 0 && !w.closing {
			w.more.Wait()
		}
		if len(w.pending) == 0 {
			w.finished = true
			w.progress.Broadcast()
			return
		}
		w.settle()
		batch := w.pending
		w.pending, w.spare = w.spare[:0], nil
		failed := w.err != nil
		w.mu.Unlock()

		// A large batch goes to the disk a slice at a time, each counted
		// as written once it is, so a disk that stalls on a write holds
		// up only that slice against the limit.
		var size int64
		buf = buf[:0]
		for i, e := range batch {
			size += e.size()
			if !failed {
				buf = appendEvent(buf, e.d, e.code, e.data)
			}
			if len(buf) < writeSlice && i < len(batch)-1 {
				continue
			}
			var err error
			if !failed && len(buf) > 0 {
				_, err = w.dst.Write(buf)
			}
			buf = buf[:0]
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = fmt.Errorf("write: %w", err)
			}
			failed = w.err != nil
			w.written += size
			size = 0
			w.progress.Broadcast()
			w.mu.Unlock()
		}
		if cap(buf) > maxSpare {
			buf = nil
		}
		clear(batch) // the events' data goes back to the garbage collector

		w.mu.Lock()
		w.spare = batch
	}
}
