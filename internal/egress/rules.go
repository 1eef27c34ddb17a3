package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// presetPrefix starts an allowlist entry that names a preset.
const presetPrefix = "preset:"

// Presets returns the named allowlists an entry "preset:NAME" stands for:
// the hosts one ecosystem's package manager downloads from. The README
// lists them; a test keeps the two in step.
func Presets() map[string][]string {
	return map[string][]string{
		"go":    {"proxy.golang.org:443", "sum.golang.org:443"},
		"npm":   {"registry.npmjs.org:443"},
		"pypi":  {"pypi.org:443", "files.pythonhosted.org:443"},
		"cargo": {"index.crates.io:443", "static.crates.io:443", "crates.io:443"},
	}
}

// Rule is one allowlist entry: a host name (exact, or "*.suffix" for any
// name under suffix), or an address or network, with a port (0: any).
type Rule struct {
	// Name is a lower-case host name, or "*." and a suffix; empty for an
	// address rule.
	Name string
	// Net is the address rule's network (a single address is a /32 or
	// /128); invalid for a name rule.
	Net netip.Prefix
	// Port is the one port allowed; 0 allows every port.
	Port uint16
	// Entry is the allowlist entry the rule came from ("preset:go" for a
	// preset's hosts), as records and replies name it.
	Entry string
}

// Allowlist is what one session may reach through the proxy. The zero
// value allows nothing.
type Allowlist struct {
	rules []Rule
}

// ErrBadEntry is wrapped by every error about an allowlist entry.
var ErrBadEntry = errors.New("bad network.allow entry")

// ParseAllow reads the entries of a target's network.allow: "host",
// "host:port", "*.domain", "*.domain:port", an IP address ("10.0.0.5",
// "[fd00::1]:443", "127.0.0.1:8080") or network ("10.0.0.0/8",
// "10.0.0.0/8:5432"), or "preset:NAME" (see Presets).
func ParseAllow(entries []string) (Allowlist, error) {
	var a Allowlist
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if name, ok := strings.CutPrefix(e, presetPrefix); ok {
			hosts, ok := Presets()[name]
			if !ok {
				return Allowlist{}, fmt.Errorf("%w %q: no such preset; the presets are %s", ErrBadEntry, e, presetNames())
			}
			for _, h := range hosts {
				r, err := parseRule(h)
				if err != nil {
					return Allowlist{}, err
				}
				r.Entry = e
				a.rules = append(a.rules, r)
			}
			continue
		}
		r, err := parseRule(e)
		if err != nil {
			return Allowlist{}, err
		}
		a.rules = append(a.rules, r)
	}
	return a, nil
}

func presetNames() string {
	names := make([]string, 0, len(Presets()))
	for n := range Presets() {
		names = append(names, presetPrefix+n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseRule reads one entry that is not a preset.
func parseRule(e string) (Rule, error) {
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%w %q: %s", ErrBadEntry, e, why)
	}
	if e == "" {
		return bad("empty")
	}
	host, port := e, uint16(0)
	switch {
	case strings.HasPrefix(e, "["):
		// [v6] or [v6]:port or [v6/len]:port
		end := strings.Index(e, "]")
		if end < 0 {
			return bad("a '[' without ']'")
		}
		host = e[1:end]
		rest := e[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return bad("expected ':PORT' after ']'")
			}
			n, err := parsePort(p)
			if err != nil {
				return bad(err.Error())
			}
			port = n
		}
	case strings.Count(e, ":") == 1:
		h, p, _ := strings.Cut(e, ":")
		n, err := parsePort(p)
		if err != nil {
			return bad(err.Error())
		}
		host, port = h, n
	}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		return Rule{Net: pfx.Masked(), Port: port, Entry: e}, nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return bad("an address with a zone")
		}
		addr = addr.Unmap()
		return Rule{Net: netip.PrefixFrom(addr, addr.BitLen()), Port: port, Entry: e}, nil
	}
	if strings.Contains(host, ":") {
		return bad("an IPv6 address with a port goes in brackets: [addr]:port")
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	wild := strings.HasPrefix(name, "*.")
	if wild {
		name = name[2:]
	}
	if err := checkName(name); err != nil {
		return bad(err.Error())
	}
	if wild {
		name = "*." + name
	}
	return Rule{Name: name, Port: port, Entry: e}, nil
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

// checkName accepts a DNS host name: dot-separated labels of letters,
// digits, '-' and '_', none empty or longer than 63 bytes.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("not a host name")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return errors.New("not a host name (an empty or over-long label)")
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return errors.New("'*' may only start an entry, as in *.example.com")
				}
				return fmt.Errorf("not a host name (%q)", c)
			}
		}
	}
	return nil
}

// Empty reports whether a allows nothing at all.
func (a Allowlist) Empty() bool { return len(a.rules) == 0 }

// Rules returns the allowlist's rules, presets expanded.
func (a Allowlist) Rules() []Rule { return slices.Clone(a.rules) }

// matchName returns the first name rule that allows host:port. A
// wildcard rule covers names under its suffix, not the suffix itself.
func (a Allowlist) matchName(host string, port uint16) (Rule, bool) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, r := range a.rules {
		if r.Name == "" || (r.Port != 0 && r.Port != port) {
			continue
		}
		if suffix, ok := strings.CutPrefix(r.Name, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return r, true
			}
		} else if host == r.Name {
			return r, true
		}
	}
	return Rule{}, false
}

// matchAddr returns the first address rule that allows addr:port.
func (a Allowlist) matchAddr(addr netip.Addr, port uint16) (Rule, bool) {
	addr = addr.Unmap()
	for _, r := range a.rules {
		if r.Name != "" || (r.Port != 0 && r.Port != port) {
			continue
		}
		if r.Net.Contains(addr) {
			return r, true
		}
	}
	return Rule{}, false
}

// special lists the networks that are not the public internet: a name
// that resolves into one of them is refused unless an address rule lists
// the address (DNS rebinding gets nothing).
func special() []netip.Prefix {
	var ps []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3",
		"::/127", "64:ff9b::/96", "64:ff9b:1::/48", "fc00::/7", "fe80::/10", "ff00::/8",
	} {
		ps = append(ps, netip.MustParsePrefix(s))
	}
	return ps
}

// isSpecial reports whether addr is loopback, private, link-local,
// multicast, unspecified or otherwise not a public unicast address.
func isSpecial(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !addr.IsValid() || !addr.IsGlobalUnicast() {
		return true
	}
	for _, p := range special() {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
