package egress

import (
	"net"
	"sync"
	"time"
)

// An inspected connection ends TLS on both sides, so each byte of a
// download is decrypted and encrypted once more in tandem, and crypto/tls
// writes to the socket once per record (16 KiB at most): on loopback the
// proxy spent as much time in those system calls as in the crypto.
// batchConn is the raw TCP connection under such a TLS connection: its
// writes are queued and sent by a goroutine of its own, so the records a
// busy proxy writes while the socket still sends the last ones leave
// together, in one call. Nothing waits for more data: what is queued is
// sent as soon as the previous send is done, so a stream's small pieces
// are not held back, and a write waits only while batchMax bytes are
// queued already (the peer reads slowly).
type batchConn struct {
	net.Conn

	mu      sync.Mutex
	cond    sync.Cond // signals queued data, a finished send, closing
	queued  []byte    // written, not yet sent
	sending bool      // the sender holds a batch
	err     error     // the first send's error: later writes fail with it
	closing bool
	done    chan struct{} // closed when the sender has returned
}

// batchMax is how much a batchConn queues before a write waits: four
// records.
const batchMax = 64 << 10

// newBatchConn wraps c; Close ends its sender.
func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c, done: make(chan struct{})}
	b.cond.L = &b.mu
	go b.send()
	return b
}

// Write queues p for the sender; it waits while batchMax bytes are
// queued, and fails once a send has failed or the connection is closing.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for len(p) > 0 {
		for b.err == nil && !b.closing && len(b.queued) >= batchMax {
			b.cond.Wait()
		}
		switch {
		case b.err != nil:
			return n, b.err
		case b.closing:
			return n, net.ErrClosed
		}
		k := min(len(p), batchMax-len(b.queued))
		b.queued = append(b.queued, p[:k]...)
		p, n = p[k:], n+k
		b.cond.Broadcast()
	}
	return n, nil
}

// send writes what is queued, all of it in one call, until the
// connection closes or a write fails.
func (b *batchConn) send() {
	defer close(b.done)
	var batch []byte
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for len(b.queued) == 0 && !b.closing {
			b.cond.Wait()
		}
		if len(b.queued) == 0 {
			return
		}
		batch, b.queued = b.queued, batch[:0]
		b.sending = true
		b.mu.Unlock()
		_, err := b.Conn.Write(batch)
		b.mu.Lock()
		b.sending = false
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
		if b.err != nil {
			return
		}
	}
}

// flush waits until what is queued is sent, or a send has failed.
func (b *batchConn) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && (len(b.queued) > 0 || b.sending) {
		b.cond.Wait()
	}
	return b.err
}

// CloseWrite sends what is queued, then half-closes the connection where
// it can (crypto/tls passes a CloseWrite on).
func (b *batchConn) CloseWrite() error {
	if err := b.flush(); err != nil {
		return err
	}
	if cw, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close sends what is queued (for at most closeFlush), then closes.
func (b *batchConn) Close() error {
	b.mu.Lock()
	b.closing = true
	b.cond.Broadcast()
	b.mu.Unlock()
	_ = b.Conn.SetWriteDeadline(time.Now().Add(closeFlush))
	<-b.done
	return b.Conn.Close()
}

// closeFlush bounds how long Close waits for queued bytes to reach a
// peer that does not read.
const closeFlush = 5 * time.Second
