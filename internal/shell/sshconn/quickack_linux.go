package sshconn

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Until sshd allocates the PTY it leaves Nagle's algorithm on, so a small
// message of its waits for the ACK of the one before; the client's kernel
// delays that ACK by 40 ms when it has nothing to send. Right after login
// sshd sends two (the host keys notice, then the answer to the shell's
// channel open), which cost every connect a 40 ms stall. withQuickAck
// has every read ask the kernel to ACK at once (TCP_QUICKACK, which the
// kernel forgets after a while, so it is set again each time): a
// setsockopt per read, about a microsecond.

// quickAckConn is a TCP connection that re-arms TCP_QUICKACK after every
// read.
type quickAckConn struct {
	net.Conn
	raw syscall.RawConn
}

// withQuickAck wraps nc when it is a TCP connection.
func withQuickAck(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nc
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	q := &quickAckConn{Conn: nc, raw: raw}
	q.arm()
	return q
}

func (q *quickAckConn) Read(p []byte) (int, error) {
	n, err := q.Conn.Read(p)
	q.arm()
	return n, err
}

// arm sets TCP_QUICKACK, which also sends an ACK the kernel was holding.
func (q *quickAckConn) arm() {
	_ = q.raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
}
