package session

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"time"

	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/shell"
)

// Egress is a local target's network allowlist, served by tandem's egress
// proxy. The layer that holds the proxy sets Open.
type Egress struct {
	Allow egress.Allowlist
	// Ask holds an unlisted host for a human instead of refusing it.
	Ask bool
	// Forward sends that ask to the policy's upstream approver, as a
	// forward rule does (network.ask: forward).
	Forward bool
	// Hosts answers for these names without DNS.
	Hosts map[string][]netip.Addr
	// Credentials are what the proxy adds to requests to their hosts
	// (network.credentials), secrets included: never shown to the session.
	Credentials []egress.Credential
	// Open makes the session's place on the proxy, with the credential
	// its programs present there, before its shell starts. It does not
	// listen yet: the shell's backend starts it inside the session's
	// network namespace (or, where there is none, on the host's
	// loopback). close ends it with the session.
	Open func(ctx context.Context, s *Session) (p shell.LaunchProxy, close func(), err error)
}

// errNoProxy: a target with an allowlist and nothing to serve it. The
// session is refused rather than started with the network off or on.
var errNoProxy = errors.New("the target has a network allowlist, and this server has no egress proxy to serve it")

// maxConnections bounds the connections a session keeps for its replies,
// the status strip and the dashboard.
const maxConnections = 256

// openEgress makes the session's place on the proxy, if its target has an
// allowlist, and hands it to the shell, whose backend starts its port.
func (s *Session) openEgress(ctx context.Context, so *shell.Options) error {
	e := s.Target.Egress
	if e == nil {
		return nil
	}
	if e.Open == nil {
		return errNoProxy
	}
	p, closeFn, err := e.Open(ctx, s)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.egressClose = closeFn
	s.mu.Unlock()
	so.Proxy = p
	return nil
}

// closeEgress ends the session's proxy port and its open connections.
func (s *Session) closeEgress() {
	s.mu.Lock()
	f := s.egressClose
	s.egressClose = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
}

// NoteConnection files a report of the egress proxy: a decision, or a
// connection's end (which replaces its decision).
func (s *Session) NoteConnection(c egress.Conn) {
	s.mu.Lock()
	i := slices.IndexFunc(s.conns, func(o egress.Conn) bool { return o.ID == c.ID })
	if i >= 0 {
		s.conns[i] = c
	} else {
		if len(s.conns) == maxConnections {
			s.conns = slices.Delete(s.conns, 0, 1)
		}
		s.conns = append(s.conns, c)
	}
	s.mu.Unlock()
	s.changed() // the status strip and the dashboard
}

// RecentConnections returns the session's last n connections that are
// open, or were refused or denied, newest last: what the monitoring page
// names.
func (s *Session) RecentConnections(n int) []egress.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []egress.Conn
	for i := len(s.conns) - 1; i >= 0 && len(out) < n; i-- {
		c := s.conns[i]
		if !c.Ended {
			out = append(out, c)
		}
	}
	slices.Reverse(out)
	return out
}

// Connections returns the connections the session asked for from since
// to until (zero: until now), oldest first.
func (s *Session) Connections(since, until time.Time) []egress.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []egress.Conn
	for _, c := range s.conns {
		if !c.Started.Before(since) && (until.IsZero() || !c.Started.After(until)) {
			out = append(out, c)
		}
	}
	return out
}

// OpenConnections returns the session's connections that are open now.
func (s *Session) OpenConnections() []egress.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []egress.Conn
	for _, c := range s.conns {
		if !c.Ended && (c.Decision == egress.Allowed || c.Decision == egress.Approved) {
			out = append(out, c)
		}
	}
	return out
}
