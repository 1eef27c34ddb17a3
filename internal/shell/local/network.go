package local

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"

	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/shell"
)

// Ports the session's proxy listener may take inside its network
// namespace: above the well-known and common development ports. Nothing
// else listens in a fresh namespace, so any one is free.
const (
	proxyPortMin = 20000
	proxyPortMax = 60000
)

// netSetup is the network part of one sandboxed shell: what the launcher
// is told, and, with a proxy in a namespace, the socket its listener
// comes back on.
type netSetup struct {
	proxy         shell.LaunchProxy
	port          uint16
	parent, child *os.File // nil unless the listener is made in the namespace
	namespace     bool     // the launcher is cloned into a namespace of its own
	// sockParent and sockChild carry the socket helper's requests and
	// sockets (a namespace only): how tandem reaches the session's ports.
	sockParent, sockChild *os.File
}

// network fills the network fields of p (network on, a namespace, or the
// fallback filter) and, with an allowlist, decides where the session's
// proxy port lives. fd is the descriptor the listener's socket gets in
// the launcher (if it needs one).
func (o *Options) network(p *sandbox.Policy, l shell.Launch, fd int) (*netSetup, error) {
	n := &netSetup{proxy: l.Proxy}
	switch {
	case o.Network:
		p.Network = true
		return n, nil
	case o.NoNetNamespace:
		p.NetFilter = true
		if l.Proxy == nil {
			return n, nil
		}
		port, err := l.Proxy.Listen()
		if err != nil {
			return nil, err
		}
		n.port = port
	default:
		p.Namespace, n.namespace = true, true
		parent, child, err := sandbox.SocketPair()
		if err != nil {
			return nil, err
		}
		n.sockParent, n.sockChild = parent, child
		if l.Proxy == nil {
			return n, nil
		}
		parent, child, err = sandbox.ProxyPair()
		if err != nil {
			n.abort()
			return nil, err
		}
		n.parent, n.child = parent, child
		n.port = uint16(proxyPortMin + rand.IntN(proxyPortMax-proxyPortMin))
		p.ProxyPort, p.ProxyFD = n.port, fd
	}
	// Landlock, a second layer: the proxy's port is the only TCP
	// connect allowed.
	p.ConnectPorts = []uint16{n.port}
	return n, nil
}

// env is what points the shell's tools at the proxy.
func (n *netSetup) env() []string {
	if n == nil || n.proxy == nil {
		return nil
	}
	return proxyEnv(n.port, n.proxy.Token())
}

// started runs once the launcher is running: it drops tandem's copy of
// the launcher's end and serves the session's proxy on the listener the
// launcher made in the namespace.
func (n *netSetup) started(ctx context.Context) error {
	if n == nil || n.parent == nil {
		return nil
	}
	_ = n.child.Close()
	rctx, cancel := context.WithTimeout(ctx, receiveTimeout)
	ln, err := sandbox.ReceiveProxy(rctx, n.parent)
	cancel()
	_ = n.parent.Close()
	if err != nil {
		return err
	}
	if err := n.proxy.Serve(ln); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	return nil
}

// abort releases what a launcher that never started would have used.
func (n *netSetup) abort() {
	if n != nil && n.parent != nil {
		_ = errors.Join(n.child.Close(), n.parent.Close())
	}
	if n != nil && n.sockParent != nil {
		_ = errors.Join(n.sockChild.Close(), n.sockParent.Close())
	}
}

// namespaced reports whether the shell was to get a network namespace.
func (n *netSetup) namespaced() bool { return n != nil && n.namespace }

// refusedNamespace reports whether starting the launcher failed the way a
// host that forbids namespaces fails clone(2).
func refusedNamespace(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && (errno == syscall.EPERM || errno == syscall.EINVAL || errno == syscall.ENOSPC || errno == syscall.EUSERS)
}
