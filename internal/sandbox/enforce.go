package sandbox

import "fmt"

// Enforcement says, for the running kernel, what a sandboxed shell is kept
// from and what it is not. ssh_connect returns it for local sessions and
// the README lists the same, so nobody has to guess what "sandboxed" means
// on their machine.
type Enforcement struct {
	LandlockABI int    `json:"landlockABI"`
	Filesystem  string `json:"filesystem"`
	// Network names the layer that keeps the session off the network:
	// "namespace", "seccomp" (the fallback where namespaces are refused)
	// or "host" (network: true).
	Network string `json:"network"`
	// NetworkNote, with the fallback, says why there is no namespace.
	NetworkNote string   `json:"networkNote,omitempty"`
	TCP         string   `json:"tcp"`
	UDP         string   `json:"udp"`
	UnixSockets string   `json:"unixSockets"`
	Signals     string   `json:"signals"`
	NotEnforced []string `json:"notEnforced"`
}

// Landlock ABIs that add restrictions beyond the file system and TCP.
const (
	minScopeABI = 6  // signals and abstract UNIX sockets scoped
	minUDPABI   = 10 // UDP
)

// Describe reports what the kernel enforces for a sandboxed session whose
// network is kept by layer.
func Describe(layer NetLayer) Enforcement {
	return describe(kernelABI(), layer)
}

// Fallback is the description under the fallback filter, noting why
// (the error of ProbeNamespace, or that it was turned off).
func (e Enforcement) Fallback(why string) Enforcement {
	e.NetworkNote = "no network namespace: " + why + "; a seccomp filter refuses what Landlock's TCP rules do not see instead"
	return e
}

// Proxied says the session's TCP goes only to tandem's egress proxy.
func (e Enforcement) Proxied() Enforcement {
	switch {
	case e.Network == string(NetNamespace):
		e.TCP = "only to the session's egress proxy, on a port of the session's own loopback (its network namespace has no other way out); the proxy lets through the hosts of the target's network.allow"
	case e.LandlockABI >= minNetABI:
		e.TCP = "connect to one port only: the session's port on tandem's egress proxy, which lets through the hosts of the target's network.allow (the port is allowed on any address); no bind, no listen"
	}
	e.NotEnforced = append(e.NotEnforced, "a host the allowlist lets through can carry anything (a tool that tunnels over an allowed host)")
	return e
}

func describe(abi int, layer NetLayer) Enforcement {
	e := Enforcement{
		LandlockABI: abi,
		Network:     string(layer),
		Filesystem:  "read-write in the workspace and the session's private TMPDIR only; read-only system directories (/usr, /etc, /opt, /var without /var/tmp, /proc, /sys, /run without /run/user); nothing else, /tmp, /home and tandem's data dir included",
		NotEnforced: []string{
			"reading files that a granted system directory holds and the user may read (e.g. /etc, /proc of the same user's processes)",
			"CPU, memory and process limits (no cgroup is applied)",
			"a process that calls setsid can outlive its session",
		},
	}
	switch {
	case layer == NetHost:
		e.TCP = "allowed (the target sets network: true)"
		e.UDP = "allowed (the target sets network: true)"
	case abi < minNetABI:
		e.TCP = fmt.Sprintf("not enforceable with Landlock ABI %d: sandboxed sessions are refused", abi)
		e.UDP = e.TCP
	case layer == NetNamespace:
		e.TCP = "no way out: the session's network namespace has only its own loopback, where Landlock denies TCP bind and tandem (which makes the session's connects) TCP connect too"
		e.UDP = "no way out: the session's network namespace has only its own loopback (UDP, DNS, raw sockets, MPTCP and Fast Open included)"
	default:
		e.TCP = "denied: no TCP bind (Landlock) or connect (tandem, which makes the session's connects, keeps Landlock's rule); other stream protocols (MPTCP, SCTP), TCP Fast Open and listen are refused by a seccomp filter (tandem lets UNIX sockets listen)"
		e.UDP = "denied: a seccomp filter refuses UDP, raw, ping and packet sockets"
	}
	// tandem makes every connect of a session on its behalf (execguard's
	// filter, installed for every sandboxed session), and checks the path
	// of a unix socket there, whatever the Landlock ABI.
	abstract := "abstract sockets are refused (tandem makes the session's connects, and its own would pass Landlock's scoping)"
	if layer == NetNamespace {
		abstract = "abstract sockets only of the session's own network namespace"
	}
	e.UnixSockets = abstract + "; path sockets only in the workspace, the session's private directories (run dir, TMPDIR, HOME) and the target's unixSockets: tandem resolves the path as the session sees it and connects on its behalf; socketpair works"
	e.NotEnforced = append(e.NotEnforced, "a unix datagram sent to a path is checked, then sent by the kernel: a second thread that rewrites its address after the check can send it to a socket outside (connects have no such race)")
	if abi >= minScopeABI {
		e.Signals = "denied to processes outside the sandbox (tandem included)"
	} else {
		e.Signals = fmt.Sprintf("not scoped (Landlock ABI %d < %d): the shell can signal other processes of the same user", abi, minScopeABI)
		e.NotEnforced = append(e.NotEnforced, "signals to processes outside the sandbox")
	}
	return e
}
