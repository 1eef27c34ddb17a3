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

// minScopeABI is the first Landlock ABI that scopes signals and abstract
// UNIX sockets to the sandbox.
const minScopeABI = 6

// Describe reports what the kernel enforces for a policy with the given
// network setting.
func Describe(network bool) Enforcement {
	return describe(kernelABI(), network)
}

func describe(abi int, network bool) Enforcement {
	e := Enforcement{
		LandlockABI: abi,
		Filesystem:  "read-write in the workspace and the session's private TMPDIR only; read-only system directories (/usr, /etc, /opt, /var without /var/tmp, /proc, /sys, /run); nothing else, /tmp, /home and tandem's data dir included",
		UDP:         "not restricted: Landlock cannot restrict UDP on this kernel",
		NotEnforced: []string{
			"UDP traffic",
			"connecting to UNIX sockets by path where a read-only directory holds one (e.g. under /run)",
			"reading /proc entries of processes of the same user outside the sandbox",
			"CPU, memory and process limits (no cgroup is applied)",
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
	if abi >= minScopeABI {
		e.UnixSockets = "abstract sockets outside the sandbox are unreachable; path sockets only where the file system rules reach"
		e.Signals = "denied to processes outside the sandbox (tandem included)"
	} else {
		e.UnixSockets = fmt.Sprintf("not scoped (Landlock ABI %d < %d)", abi, minScopeABI)
		e.Signals = fmt.Sprintf("not scoped (Landlock ABI %d < %d): the shell can signal other processes of the same user", abi, minScopeABI)
		e.NotEnforced = append(e.NotEnforced, "signals to, and abstract sockets of, processes outside the sandbox")
	}
	return e
}
