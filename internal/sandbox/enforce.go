package sandbox

import "fmt"

// Enforcement says, for the running kernel, what a sandboxed shell is kept
// from and what it is not. ssh_connect returns it for local sessions and
// the README lists the same, so nobody has to guess what "sandboxed" means
// on their machine.
type Enforcement struct {
	LandlockABI int      `json:"landlockABI"`
	Filesystem  string   `json:"filesystem"`
	TCP         string   `json:"tcp"`
	UDP         string   `json:"udp"`
	UnixSockets string   `json:"unixSockets"`
	Signals     string   `json:"signals"`
	NotEnforced []string `json:"notEnforced"`
}

// Landlock ABIs that add restrictions beyond the file system and TCP.
const (
	minScopeABI    = 6  // signals and abstract UNIX sockets scoped
	minUnixPathABI = 9  // connecting to UNIX sockets by path
	minUDPABI      = 10 // UDP
)

// Describe reports what the kernel enforces for a policy with the given
// network setting.
func Describe(network bool) Enforcement {
	return describe(kernelABI(), network)
}

// Proxied says the session's TCP goes only to tandem's egress proxy.
func (e Enforcement) Proxied() Enforcement {
	if e.LandlockABI >= minNetABI {
		e.TCP = "connect to one port only: the session's port on tandem's egress proxy, which lets through the hosts of the target's network.allow (Landlock allows the port on any address); no bind"
	}
	e.NotEnforced = append(e.NotEnforced, "a host the allowlist lets through can carry anything (a tool that tunnels over an allowed host)")
	return e
}

func describe(abi int, network bool) Enforcement {
	e := Enforcement{
		LandlockABI: abi,
		Filesystem:  "read-write in the workspace and the session's private TMPDIR only; read-only system directories (/usr, /etc, /opt, /var without /var/tmp, /proc, /sys, /run without /run/user); nothing else, /tmp, /home and tandem's data dir included",
		NotEnforced: []string{
			"reading files that a granted system directory holds and the user may read (e.g. /etc, /proc of the same user's processes)",
			"CPU, memory and process limits (no cgroup is applied)",
			"a process that calls setsid can outlive its session",
		},
	}
	switch {
	case network:
		e.TCP = "allowed (the target sets network: true)"
	case abi >= minNetABI:
		e.TCP = "denied: no TCP bind or connect"
	default:
		e.TCP = fmt.Sprintf("not enforceable with Landlock ABI %d: sandboxed sessions are refused", abi)
	}
	switch {
	case network:
		e.UDP = "allowed (the target sets network: true)"
	case abi >= minUDPABI:
		e.UDP = "denied"
	default:
		e.UDP = fmt.Sprintf("not restricted (Landlock ABI %d < %d)", abi, minUDPABI)
		e.NotEnforced = append(e.NotEnforced, "UDP traffic")
	}
	switch {
	case abi >= minUnixPathABI:
		e.UnixSockets = "abstract sockets outside the sandbox are unreachable; path sockets only in the workspace and TMPDIR"
	case abi >= minScopeABI:
		e.UnixSockets = fmt.Sprintf("abstract sockets outside the sandbox are unreachable; connecting to path sockets is not restricted (Landlock ABI %d < %d)", abi, minUnixPathABI)
		e.NotEnforced = append(e.NotEnforced, "connecting to UNIX sockets by path (e.g. a daemon's socket under /run)")
	default:
		e.UnixSockets = fmt.Sprintf("not restricted (Landlock ABI %d < %d)", abi, minScopeABI)
		e.NotEnforced = append(e.NotEnforced, "UNIX sockets, abstract and by path")
	}
	if abi >= minScopeABI {
		e.Signals = "denied to processes outside the sandbox (tandem included)"
	} else {
		e.Signals = fmt.Sprintf("not scoped (Landlock ABI %d < %d): the shell can signal other processes of the same user", abi, minScopeABI)
		e.NotEnforced = append(e.NotEnforced, "signals to processes outside the sandbox")
	}
	return e
}
