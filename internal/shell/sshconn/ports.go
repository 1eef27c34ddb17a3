package sshconn

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// DialPort connects to 127.0.0.1:port on the remote host, through a
// direct-tcpip channel of the session's own SSH connection: what a
// preview of a dev server on the remote's loopback needs. It implements
// shell.PortDialer. The remote sshd decides whether it allows it
// (AllowTcpForwarding).
func (c *conn) DialPort(ctx context.Context, port int) (net.Conn, error) {
	nc, err := c.client.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("ssh: dial remote port %d: %w", port, err)
	}
	return nc, nil
}
