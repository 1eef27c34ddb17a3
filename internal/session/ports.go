package session

import (
	"context"
	"net"
)

// DialPort connects to 127.0.0.1:port as the session's programs see it
// (inside a local session's network namespace, on an SSH target's
// loopback): the way to a preview of what the agent serves there.
func (s *Session) DialPort(ctx context.Context, port int) (net.Conn, error) {
	return s.sh.DialPort(ctx, port)
}

// Done is closed once the session's shell has ended, for whatever holds
// something of the session's (a preview) and must end with it.
func (s *Session) Done() <-chan struct{} { return s.sh.Done() }
