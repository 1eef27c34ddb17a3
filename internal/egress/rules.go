package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
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
	// Methods and Paths, when set, limit what may be asked of the host:
	// each request must use one of Methods and a path Paths matches. The
	// proxy can judge that only by seeing the request, so such a host's
	// TLS connections are inspected (see Credential).
	Methods []string
	Paths   []string
}

// Entry is one allowlist entry with its request rules: network.allow's
// map form {host, methods, paths}. A plain string entry is an Entry with
// Host only.
type Entry struct {
	Host    string
	Methods []string
	Paths   []string
}

// Judged reports whether the rule limits methods or paths.
func (r Rule) Judged() bool { return len(r.Methods) > 0 || len(r.Paths) > 0 }

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
	es := make([]Entry, len(entries))
	for i, e := range entries {
		es[i] = Entry{Host: e}
	}
	return ParseEntries(es)
}

// ParseEntries reads network.allow entries that may carry request rules:
// methods (upper-case HTTP method names) and paths ("/exact", or
// "/prefix/*" for everything under it). A preset takes neither.
func ParseEntries(entries []Entry) (Allowlist, error) {
	var a Allowlist
	for _, en := range entries {
		e := strings.TrimSpace(en.Host)
		methods, paths, err := parseRequestRules(e, en.Methods, en.Paths)
		if err != nil {
			return Allowlist{}, err
		}
		if name, ok := strings.CutPrefix(e, presetPrefix); ok {
			if methods != nil || paths != nil {
				return Allowlist{}, fmt.Errorf("%w %q: a preset takes no methods or paths", ErrBadEntry, e)
			}
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
		r.Methods, r.Paths = methods, paths
		a.rules = append(a.rules, r)
	}
	return a, nil
}

// parseRequestRules checks an entry's methods and paths.
func parseRequestRules(e string, methods, paths []string) ([]string, []string, error) {
	var ms, ps []string
	for _, m := range methods {
		if m == "" || strings.ToUpper(m) != m || strings.IndexFunc(m, func(c rune) bool { return c < 'A' || c > 'Z' }) >= 0 {
			return nil, nil, fmt.Errorf("%w %q: method %q is not an upper-case HTTP method name such as GET", ErrBadEntry, e, m)
		}
		ms = append(ms, m)
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return nil, nil, fmt.Errorf("%w %q: path %q must start with /", ErrBadEntry, e, p)
		}
		if i := strings.Index(p, "*"); i >= 0 && i != len(p)-1 {
			return nil, nil, fmt.Errorf("%w %q: path %q may hold '*' only at its end (a prefix)", ErrBadEntry, e, p)
		}
		if cleanPath(strings.TrimSuffix(p, "*")) != strings.TrimSuffix(p, "*") {
			return nil, nil, fmt.Errorf("%w %q: path %q is not clean (no //, . or .. segments)", ErrBadEntry, e, p)
		}
		ps = append(ps, p)
	}
	return ms, ps, nil
}

// cleanPath is path.Clean that keeps a trailing slash.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// judgeRequest says why the rule refuses method on urlPath (the decoded
// path), or "" when it allows it. A path that is not clean is refused:
// the host might read "/a/../b" as "/b".
func (r Rule) judgeRequest(method, urlPath string) string {
	if len(r.Methods) > 0 && !slices.Contains(r.Methods, method) {
		return fmt.Sprintf("method %s is not one of %s that the allowlist entry %q lets through", method, strings.Join(r.Methods, ", "), r.Entry)
	}
	if len(r.Paths) == 0 {
		return ""
	}
	if urlPath == "" || cleanPath(urlPath) != urlPath {
		return fmt.Sprintf("path %q is not clean (//, . or .. segments): it is refused where paths are judged", urlPath)
	}
	for _, p := range r.Paths {
		if pre, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(urlPath, pre) {
				return ""
			}
		} else if urlPath == p {
			return ""
		}
	}
	return fmt.Sprintf("path %s is not under %s that the allowlist entry %q lets through", urlPath, strings.Join(r.Paths, ", "), r.Entry)
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
