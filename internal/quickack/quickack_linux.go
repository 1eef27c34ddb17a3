package quickack

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// conn is a TCP connection that re-arms TCP_QUICKACK after every read.
type conn struct {
	net.Conn
	raw syscall.RawConn
}

// Wrap returns nc re-arming TCP_QUICKACK after every read, when it is a
// TCP connection; anything else comes back as it is.
func Wrap(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	q := &conn{Conn: nc, raw: raw}
	q.arm()
	return q
}

func (q *conn) Read(p []byte) (int, error) {
	n, err := q.Conn.Read(p)
	q.arm()
	return n, err
}

// arm sets TCP_QUICKACK, which also sends an ACK the kernel was holding.
func (q *conn) arm() {
	_ = q.raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
}
