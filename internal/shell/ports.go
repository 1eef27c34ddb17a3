package shell

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// PortDialer is implemented by a Conn that can reach a TCP port the
// session's own programs listen on, at 127.0.0.1 as they see it: a local
// shell inside its network namespace, an SSH shell on the remote's
// loopback. Previews of a dev server go through it.
type PortDialer interface {
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// ErrNoPorts is returned by DialPort when the shell's transport cannot
// reach the session's ports.
var ErrNoPorts = errors.New("this session's transport cannot reach its ports")

// DialPort connects to 127.0.0.1:port as the session's programs see it.
func (s *Shell) DialPort(ctx context.Context, port int) (net.Conn, error) {
	d, ok := s.conn.(PortDialer)
	if !ok {
		return nil, fmt.Errorf("dial port %d: %w", port, ErrNoPorts)
	}
	return d.DialPort(ctx, port)
}
