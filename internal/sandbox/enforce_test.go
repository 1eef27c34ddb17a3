package sandbox

import (
	"strings"
	"testing"
)

// TestDescribePerLayer: the description names the network layer in force
// and says truthfully what each stops, per Landlock ABI.
func TestDescribePerLayer(t *testing.T) {
	for _, tc := range []struct {
		abi                  int
		layer                NetLayer
		tcp, udp, unix, sigs string
	}{
		{3, NetNamespace, "not enforceable", "not enforceable", "abstract sockets only of the session's own network namespace; path sockets only", "not scoped"},
		{4, NetSeccomp, "denied", "denied: a seccomp filter", "abstract sockets are refused", "not scoped"},
		{6, NetNamespace, "no way out", "no way out", "abstract sockets only of the session's own network namespace; path sockets only", "denied"},
		{7, NetSeccomp, "denied", "denied: a seccomp filter", "abstract sockets are refused", "denied"},
		{9, NetNamespace, "no way out", "no way out", "abstract sockets only of the session's own network namespace; path sockets only", "denied"},
		{10, NetSeccomp, "denied", "denied", "abstract sockets are refused", "denied"},
		{7, NetHost, "allowed", "allowed", "abstract sockets are refused", "denied"},
	} {
		e := describe(tc.abi, tc.layer)
		if e.Network != string(tc.layer) {
			t.Errorf("ABI %d %s: network %q", tc.abi, tc.layer, e.Network)
		}
		for _, c := range []struct{ got, want string }{{e.TCP, tc.tcp}, {e.UDP, tc.udp}, {e.UnixSockets, tc.unix}, {e.Signals, tc.sigs}} {
			if !strings.HasPrefix(c.got, c.want) {
				t.Errorf("ABI %d %s: %q, want it to start with %q", tc.abi, tc.layer, c.got, c.want)
			}
		}
		if !strings.Contains(e.UnixSockets, "unixSockets") || strings.Contains(strings.Join(e.NotEnforced, "|"), "UNIX sockets by path") {
			t.Errorf("ABI %d %s: path sockets are checked by tandem on every ABI: %q %v", tc.abi, tc.layer, e.UnixSockets, e.NotEnforced)
		}
		if strings.Contains(strings.Join(e.NotEnforced, "|"), "UDP") {
			t.Errorf("ABI %d %s: UDP in notEnforced %v: every layer stops it now", tc.abi, tc.layer, e.NotEnforced)
		}
	}
	if p := describe(7, NetNamespace).Proxied(); !strings.Contains(p.TCP, "own loopback") {
		t.Errorf("proxied in a namespace: %q", p.TCP)
	}
	if p := describe(7, NetSeccomp).Fallback("refused"); !strings.Contains(p.NetworkNote, "refused") {
		t.Errorf("fallback note: %q", p.NetworkNote)
	}
}

// TestDefaultReadOnlyReachesNoSharedDir: no default grant, followed through
// symlinks, covers a shared temp dir or the login runtime dirs.
func TestDefaultReadOnlyReachesNoSharedDir(t *testing.T) {
	for _, g := range DefaultReadOnly() {
		for _, shared := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run/user"} {
			if Covers(g, shared) {
				t.Errorf("default grant %s covers %s", g, shared)
			}
		}
	}
}
