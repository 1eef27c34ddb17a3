package egress

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// An inspected connection moves a download as TLS records of 16 KiB: the
// proxy reads one from the host, then writes one to the session, each a
// system call and, on loopback, a packet for the kernel to carry. Those
// calls were half the proxy's CPU per byte. So the proxy reads the host
// in large reads (countConn), takes in one go every record already
// there (fillReader), and writes the records of one response write to the
// session in one call (batchConn). Nothing waits for bytes that have not
// come: a read stops where a whole record is not at hand, and a batch is
// written out before the write that made it returns.

// The large buffers these take are the proxy's copy buffers, within the
// budget of the tunnels' (copyBufs, maxBigBufs), held only while bytes are
// in them: an idle connection holds none, so a session's many connections
// cannot make tandem hold more. Without a free one, reads and writes go a
// record at a time, as plain TLS does.

// fullRecord is the most bytes one TLS record takes on the wire: with at
// least this many read ahead, reading the next record cannot wait.
const fullRecord = 5 + 16384 + 256

// countConn is an upstream connection that counts its bytes into shared
// totals, and reads ahead into a borrowed buffer.
type countConn struct {
	net.Conn
	bufs     *copyBufs
	up, down *atomic.Int64

	mu     sync.Mutex // the fields below; held through a read
	buf    []byte     // borrowed while it holds bytes not yet taken
	r, w   int        // buf[r:w] is read ahead
	err    error      // the read's error, once buf is taken
	closed bool
}

func newCountConn(c net.Conn, bufs *copyBufs, up, down *atomic.Int64) *countConn {
	return &countConn{Conn: c, bufs: bufs, up: up, down: down}
}

func (c *countConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r == c.w && c.err == nil {
		// A buffer is borrowed only for bytes already waiting: a read
		// that would wait (an idle kept-alive connection) holds none.
		var b []byte
		if !c.closed && c.waiting() > len(p) {
			b = c.bufs.Get()
		}
		if len(b) <= len(p) {
			c.bufs.Put(b)
			n, err := c.Conn.Read(p)
			c.down.Add(int64(n))
			return n, err
		}
		n, err := c.Conn.Read(b)
		c.down.Add(int64(n))
		c.buf, c.r, c.w, c.err = b, 0, n, err
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	if c.r < c.w {
		return n, nil
	}
	c.release()
	err := c.err
	c.err = nil
	return n, err
}

// waiting is how many bytes the socket holds for reading now (0 where
// that cannot be told).
func (c *countConn) waiting() int {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

// release gives the read-ahead buffer back. c.mu is held.
func (c *countConn) release() {
	if c.buf != nil {
		c.bufs.Put(c.buf)
	}
	c.buf, c.r, c.w = nil, 0, 0
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.up.Add(int64(n))
	return n, err
}

func (c *countConn) Close() error {
	err := c.Conn.Close() // ends a read that holds c.mu
	c.mu.Lock()
	c.closed = true
	c.release()
	c.mu.Unlock()
	return err
}

// readAhead is how many bytes of the host's are read and not yet taken.
func (c *countConn) readAhead() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w - c.r
}

// fillReader reads an HTTP/1 response body from the host over up, filling
// the caller's buffer while whole records are already read ahead.
type fillReader struct {
	io.ReadCloser
	up *countConn
}

func (f *fillReader) Read(p []byte) (int, error) {
	n := 0
	for {
		m, err := f.ReadCloser.Read(p[n:])
		n += m
		if err != nil || n == len(p) || m == 0 || f.up.readAhead() < fullRecord {
			return n, err
		}
	}
}

// batchConn is the session's side of an inspected connection. Between
// begin and end, what TLS writes is gathered in a borrowed buffer and
// written in one call (at the latest at end, when the buffer goes back);
// otherwise writes pass straight through, in order.
type batchConn struct {
	net.Conn
	bufs  *copyBufs
	mu    sync.Mutex
	depth int
	buf   []byte // borrowed while depth > 0
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.depth > 0 && len(b.buf)+len(p) <= cap(b.buf) {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	if err := b.flushLocked(); err != nil {
		return 0, err
	}
	if b.depth > 0 && len(p) <= cap(b.buf) {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	return b.Conn.Write(p)
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

func (b *batchConn) begin() {
	b.mu.Lock()
	if b.depth == 0 {
		b.buf = b.bufs.Get()[:0]
	}
	b.depth++
	b.mu.Unlock()
}

// end closes a batch and writes out what it gathered.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	err := b.flushLocked()
	if b.depth--; b.depth == 0 {
		b.bufs.Put(b.buf[:cap(b.buf)])
		b.buf = nil
	}
	return err
}

func (b *batchConn) Close() error {
	b.mu.Lock()
	_ = b.flushLocked()
	b.mu.Unlock()
	return b.Conn.Close()
}

// batchWriter makes each write of an HTTP/1 response (and its flush) one
// batch: HTTP/1 writes in the handler's goroutine, so a batch holds only
// what that write made, and nothing it waits for.
type batchWriter struct {
	http.ResponseWriter
	b *batchConn
}

func (w batchWriter) Write(p []byte) (int, error) {
	w.b.begin()
	n, err := w.ResponseWriter.Write(p)
	if err == nil {
		err = http.NewResponseController(w.ResponseWriter).Flush()
	}
	if ferr := w.b.end(); err == nil {
		err = ferr
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the writer beneath.
func (w batchWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
