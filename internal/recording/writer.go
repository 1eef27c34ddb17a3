package recording

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// maxPending is how far, in bytes of events, the disk may fall behind a
// Writer before it drops events.
const maxPending = 4 << 20

// eventOverhead is what an event counts against the limit beyond its
// data: about the size of its encoding's time, code and punctuation.
const eventOverhead = 24

// sink is where a Writer's bytes go: an *os.File, or a slow or failing
// stand-in in tests.
type sink interface {
	io.WriteCloser
	Sync() error
}

// Writer records one terminal session as an asciicast v2 file. Output, Input
// and Resize never wait for the disk, nor spend time on JSON: they copy the
// event into memory, and a background goroutine encodes and writes it. All
// methods are safe for concurrent use; events are recorded in the order the
// calls take the Writer's lock.
type Writer struct {
	dst   sink
	start time.Time // carries a monotonic reading: event times never go back
	limit int

	mu       sync.Mutex
	more     *sync.Cond // the flusher waits here for pending bytes or closing
	progress *sync.Cond // Flush and Close wait here for the flusher
	last     time.Duration
	pending  []event // events not yet handed to the flusher
	spare    []event
	appended int64 // bytes of events ever appended to pending (see size)
	written  int64 // bytes the flusher has finished with
	carry    [2][]byte
	gap      int64 // bytes dropped since the last loss marker
	gapSize  []byte
	lost     int64
	err      error // first disk error; nothing is written after it
	closing  bool
	hurry    int           // Flush calls waiting: the flusher does not settle
	flood    bool          // a burst passed settleBytes: the flusher does not settle
	lastAdd  time.Duration // time of the last event kept
	finished bool          // the flusher has returned

	capBytes int64 // Cap: the most output and input kept (cap.go); 0: no bound
	capKept  int64 // what output and input kept counts against it
	capNoted bool  // the notice that output stopped is in the cast
	noting   bool  // the notice is being added

	closed   chan struct{} // closed when Close has closed the file
	closeErr error         // set before closed is closed
}

// event is one recorded event, kept as it came; the flusher encodes it.
type event struct {
	d    time.Duration
	code byte
	data []byte
}

// size is what e counts against the limit.
func (e event) size() int64 { return int64(len(e.data)) + eventOverhead }

// stream indexes Writer.carry: output and input are separate UTF-8 streams.
const (
	outStream = iota
	inStream
)

// Create starts a recording at path with the header h, writing the header at
// once. The file is created with mode 0600 and must not already exist, so a
// recording is never overwritten; missing parent directories are created
// with mode 0700. h.Width and h.Height must be positive; Create sets
// h.Version to 2, a zero h.Timestamp to now, and a nil h.Env to
// {"TERM":"xterm-256color","SHELL":"/bin/bash"}.
//
// Call [Writer.Close] when the session ends: it writes what is pending and
// closes the file.
func Create(path string, h Header) (*Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("recording: create: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("recording: create: %w", err)
	}
	w, err := newWriter(f, h, maxPending)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("recording: create %s: %w", path, err)
	}
	return w, nil
}

// newWriter writes the header of h to dst and starts the flusher.
func newWriter(dst sink, h Header, limit int) (*Writer, error) {
	if h.Width <= 0 || h.Height <= 0 {
		return nil, fmt.Errorf("terminal size %dx%d: %w", h.Width, h.Height, ErrFormat)
	}
	start := time.Now()
	h.Version = 2
	if h.Timestamp == 0 {
		h.Timestamp = start.Unix()
	}
	if h.Env == nil {
		h.Env = map[string]string{"TERM": "xterm-256color", "SHELL": "/bin/bash"}
	}
	line, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if _, err := dst.Write(append(line, '\n')); err != nil {
		return nil, err
	}
	w := &Writer{dst: dst, start: start, limit: limit, closed: make(chan struct{})}
	w.more = sync.NewCond(&w.mu)
	w.progress = sync.NewCond(&w.mu)
	go w.flush()
	return w, nil
}

// Output records p as terminal output. It copies p and does not block on
// the disk; it is meant to be called with the terminal engine's lock held.
func (w *Writer) Output(p []byte) { w.data(outStream, 'o', p) }

// Input records p as keystrokes a human typed. Same rules as Output.
func (w *Writer) Input(p []byte) { w.data(inStream, 'i', p) }

// Marker records a marker ("m" event) with label, such as the start of a
// command: a player shows it on its seek bar. Same rules as Output.
func (w *Writer) Marker(label string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing || w.err != nil {
		return
	}
	w.add(w.now(), 'm', []byte(label), false)
}

// Resize records that the terminal is now cols columns by rows rows.
// Non-positive sizes are ignored. Same rules as Output.
func (w *Writer) Resize(cols, rows int) {
	if cols <= 0 || rows <= 0 {
		return
	}
	size := strconv.AppendInt(nil, int64(cols), 10)
	size = append(size, 'x')
	size = strconv.AppendInt(size, int64(rows), 10)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing || w.err != nil {
		return
	}
	if !w.add(w.now(), 'r', size, false) {
		w.gapSize = size // replayed after the loss marker, so sizes stay right
	}
}

// data records one chunk of a byte stream, keeping an incomplete trailing
// UTF-8 sequence back for the next chunk of the same stream.
func (w *Writer) data(stream int, code byte, p []byte) {
	if len(p) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closing || w.err != nil {
		return
	}
	b := p
	if c := w.carry[stream]; len(c) > 0 {
		b = append(c, p...)
	}
	head, tail := splitIncomplete(b)
	w.carry[stream] = append([]byte(nil), tail...)
	if len(head) > 0 {
		w.add(w.now(), code, head, false)
	}
}

// now returns the time since the start, never less than the last one.
func (w *Writer) now() time.Duration {
	if d := time.Since(w.start); d > w.last {
		w.last = d
	}
	return w.last
}

// add appends one event to pending, after the loss marker if events were
// dropped before it. Unless force is set, it drops the event instead when
// the disk is already limit bytes behind, and reports whether it kept it.
// The caller holds w.mu.
func (w *Writer) add(d time.Duration, code byte, data []byte, force bool) bool {
	if w.overCap(d, code, data) {
		return false
	}
	var events [3]event
	evs := events[:0]
	if w.gap > 0 {
		msg := fmt.Sprintf("\r\n[tandem: recording lost %d bytes here]\r\n", w.gap)
		evs = append(evs, event{d, 'o', []byte(msg)})
		if w.gapSize != nil {
			evs = append(evs, event{d, 'r', w.gapSize})
		}
	}
	if data != nil {
		evs = append(evs, event{d, code, data})
	}
	var n int64
	for _, e := range evs {
		n += e.size()
	}
	behind := w.appended - w.written // already handed to the flusher or pending
	// An event alone may exceed the limit: it is kept when nothing is behind,
	// so one huge chunk is never dropped for its size alone.
	if !force && behind > 0 && behind+n > int64(w.limit) {
		if code != 'r' {
			w.gap += int64(len(data))
			w.lost += int64(len(data))
		}
		return false
	}
	if data != nil {
		evs[len(evs)-1].data = bytes.Clone(data) // the caller's buffer is theirs again
	}
	if d-w.lastAdd >= settleQuiet {
		w.flood = false // output paused: a new burst
	}
	w.lastAdd = d
	w.pending = append(w.pending, evs...)
	w.appended += n
	w.gap, w.gapSize = 0, nil
	w.more.Signal()
	return true
}

// Lost returns how many output and input bytes were dropped so far because
// the disk fell behind. Each gap is marked in the cast itself.
func (w *Writer) Lost() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost
}
