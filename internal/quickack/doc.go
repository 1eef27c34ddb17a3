// Package quickack answers a peer that leaves Nagle's algorithm on
// without the 40 ms stall of a delayed ACK. Such a peer (sshd before it
// allocates a PTY, Python's http.server, which writes a response's
// headers and body apart) holds a small message until the one before is
// ACKed, and the receiving kernel delays that ACK by 40 ms when it has
// nothing to send. Wrap has every read ask the kernel to ACK at once
// (TCP_QUICKACK, which the kernel forgets after a while, so it is set
// again each time): a setsockopt per read, about a microsecond.
//
// It knows TCP connections, not what runs over them.
package quickack
