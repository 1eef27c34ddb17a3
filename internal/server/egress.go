package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/egress"
)

// newEgress makes the process's egress proxy, which serves local targets
// with a network allowlist. tandem's own port (web, MCP over HTTP) on any
// of this machine's addresses, and every forward upstream, are never
// reachable through it.
func newEgress(ctx context.Context, cfg *config.Config, own net.Addr, log *slog.Logger) *egress.Proxy {
	port := uint16(0)
	if a, ok := own.(*net.TCPAddr); ok {
		port = uint16(a.Port)
	}
	local := map[netip.Addr]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				local[p.Addr().Unmap()] = true
			}
		}
	}
	upstreams := map[netip.AddrPort]bool{}
	for _, u := range forwardURLs(cfg) {
		for _, ap := range resolveURL(ctx, u) {
			upstreams[ap] = true
		}
	}
	return egress.New(egress.Options{
		Logger: log.With("component", "egress"),
		Protected: func(ap netip.AddrPort) bool {
			a := ap.Addr().Unmap()
			if ap.Port() == port && (a.IsLoopback() || a.IsUnspecified() || local[a]) {
				return true
			}
			return upstreams[netip.AddrPortFrom(a, ap.Port())]
		},
	})
}

// forwardURLs lists every forward upstream of the config's policies.
func forwardURLs(cfg *config.Config) []string {
	var out []string
	add := func(p *config.Policy) {
		if p != nil && p.Forward != nil {
			out = append(out, p.Forward.URL)
		}
	}
	add(cfg.Policy)
	for _, t := range cfg.Targets {
		add(t.Policy)
	}
	for _, tn := range cfg.Tenants {
		add(tn.Policy)
		for _, t := range tn.Targets {
			add(t.Policy)
		}
	}
	return out
}

// resolveURL returns the addresses and port a URL reaches.
func resolveURL(ctx context.Context, raw string) []netip.AddrPort {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		addrs = []netip.Addr{a}
	} else if as, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname()); err == nil {
		addrs = as
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a.Unmap(), uint16(n)))
	}
	return out
}

// warnOpenNetwork says, at start, which local targets may connect
// anywhere: tandem's own ports and the machine's other services included.
func warnOpenNetwork(cfg *config.Config, log *slog.Logger) {
	warn := func(tenant string, ts []config.Target) {
		for _, t := range ts {
			if t.Kind == "local" && t.Network.On {
				log.Warn("local target has network: true: its sessions can reach anything, this machine's services and tandem's own port included; "+
					"list what they need in network.allow instead (see the README's Network allowlists)", "target", t.Name, "tenant", tenant)
			}
		}
	}
	warn("", cfg.Targets)
	for _, tn := range cfg.Tenants {
		warn(tn.Name, tn.Targets)
	}
}
