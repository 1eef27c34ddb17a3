package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// An inspected connection moves a download as TLS records of 16 KiB: the
// proxy reads one from the host, then writes one to the session, each a
// system call and, on loopback, a packet for the kernel to carry. Those
// calls were half the proxy's CPU per byte. So the proxy reads the host
// in large reads (upstreamReadBuf), takes in one go every record already
// there (fillReader), and writes the records of one response write to the
// session in one call (batchConn). Nothing waits for bytes that have not
// come: a read stops where a whole record is not at hand, and a batch is
// written out before the write that made it returns.

// upstreamReadBuf is what one read of an inspected connection's upstream
// takes at most.
const upstreamReadBuf = 128 << 10

// fullRecord is the most bytes one TLS record takes on the wire: with at
// least this many read ahead, reading the next record cannot wait.
const fullRecord = 5 + 16384 + 256

// countConn is an upstream connection, read through a buffer, that counts
// its bytes into shared totals.
type countConn struct {
	net.Conn
	mu       sync.Mutex // r
	r        *bufio.Reader
	up, down *atomic.Int64
}

func newCountConn(c net.Conn, up, down *atomic.Int64) *countConn {
	return &countConn{Conn: c, r: bufio.NewReaderSize(c, upstreamReadBuf), up: up, down: down}
}

func (c *countConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	n, err := c.r.Read(p)
	c.mu.Unlock()
	c.down.Add(int64(n))
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.up.Add(int64(n))
	return n, err
}

// readAhead is how many bytes of the host's are read and not yet taken.
func (c *countConn) readAhead() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Buffered()
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
// begin and end, what TLS writes is gathered and written in one call (at
// the latest at end); otherwise writes pass straight through, in order.
type batchConn struct {
	net.Conn
	mu    sync.Mutex
	depth int
	buf   []byte
}

// batchMax is the most a batch gathers before it is written.
const batchMax = 256 << 10

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.depth == 0 {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		return b.Conn.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= batchMax {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (b *batchConn) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	b.buf = b.buf[:0]
	if cap(b.buf) > batchMax {
		b.buf = nil
	}
	return err
}

func (b *batchConn) begin() {
	b.mu.Lock()
	b.depth++
	b.mu.Unlock()
}

// end closes a batch and writes out what it gathered.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.depth--
	return b.flushLocked()
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
