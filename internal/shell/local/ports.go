package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/tandem-sh/tandem/internal/sandbox"
)

// ports is how tandem reaches a TCP port the session listens on (a
// preview of the agent's dev server). In a network namespace, through the
// socket helper the launcher started there: the socket is made inside,
// tandem connects it, and the session gains no way out. Without one (the
// fallback filter, network: true, or no sandbox) the shell shares the
// host's loopback, and tandem dials 127.0.0.1:port directly; the fallback
// filter refuses listen in the session, so nothing answers there.
type ports struct {
	sockets *sandbox.Sockets // nil: the host's loopback
}

// ports builds the session's ports once its launcher has started, and
// drops tandem's copy of the helper's end.
func (n *netSetup) ports() *ports {
	if n == nil || n.sockParent == nil {
		return &ports{}
	}
	_ = n.sockChild.Close()
	return &ports{sockets: sandbox.NewSockets(n.sockParent)}
}

// dial connects to 127.0.0.1:port as the session sees it.
func (p *ports) dial(ctx context.Context, port int) (net.Conn, error) {
	if p == nil {
		return nil, errors.New("the session's ports are not reachable")
	}
	if p.sockets != nil {
		return p.sockets.Dial(ctx, port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("dial session port %d: %w", port, err)
	}
	return c, nil
}

// close ends the socket helper, if any.
func (p *ports) close() error {
	if p == nil || p.sockets == nil {
		return nil
	}
	return p.sockets.Close()
}

// DialPort connects to 127.0.0.1:port on the session's own loopback: in
// its network namespace where it has one. It implements shell.PortDialer.
func (c *conn) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return c.ports.dial(ctx, port)
}
