package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"
)

// DefaultAddr is where [Listen] binds when given no address: loopback, on a
// port the kernel picks.
const DefaultAddr = "127.0.0.1:0"

// ErrNotLoopback is returned by [Listen] for a host that is reachable from
// other machines when [ListenOptions.AllowRemote] is not set. Monitoring URLs
// grant a shell to whoever holds them, so exposing them is an explicit choice.
var ErrNotLoopback = errors.New("host is not a loopback address; monitoring URLs would be reachable from the network")

// ListenOptions configures [Listen]. A nil *ListenOptions means all defaults.
type ListenOptions struct {
	// Logger receives Listen's warnings: a taken port, a non-loopback bind.
	// Nil means slog.Default().
	Logger *slog.Logger
	// AllowRemote lets Listen bind a host that is not loopback (including ""
	// and "0.0.0.0", all interfaces); it then logs a warning saying so.
	// False, the zero value, refuses such a host with ErrNotLoopback.
	AllowRemote bool
	// Exact makes a taken port an error (wrapping syscall.EADDRINUSE)
	// instead of a move to a free one: for an address that clients are
	// configured with, such as HTTP mode's /mcp, where a move would leave
	// them talking to whatever holds the port.
	Exact bool
}

// Listen opens the web listener on addr (host:port; "" means DefaultAddr).
// If the port is taken, it logs a warning and listens on the same host on a
// port the kernel picks, so a second tandem still starts; read the actual
// address from the listener. With [ListenOptions.Exact] a taken port is
// an error instead.
func Listen(ctx context.Context, addr string, opts *ListenOptions) (net.Listener, error) {
	var o ListenOptions
	if opts != nil {
		o = *opts
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if addr == "" {
		addr = DefaultAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("web: listen %q: %w", addr, err)
	}
	loopback, err := isLoopback(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("web: listen %q: %w", addr, err)
	}
	if !loopback {
		if !o.AllowRemote {
			return nil, fmt.Errorf("web: listen %q: %w", addr, ErrNotLoopback)
		}
		log.Warn(fmt.Sprintf("web: listening on %s, which is not loopback: anyone who can reach it and holds a monitoring URL can type into that session", addr))
	}

	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) && port != "0" && !o.Exact {
		ln, err = lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
		if err == nil {
			log.Warn(fmt.Sprintf("port %s on %s is in use; listening on %s instead", port, host, ln.Addr()),
				"requested", addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		return nil, fmt.Errorf("web: listen %q: %w", addr, err)
	}
	return ln, nil
}

// isLoopback reports whether host names only loopback addresses. The empty
// host means every interface, so it is not loopback.
func isLoopback(ctx context.Context, host string) (bool, error) {
	if host == "" {
		return false, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false, fmt.Errorf("resolve %q: %w", host, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}
