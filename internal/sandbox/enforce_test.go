package sandbox

import (
	"strings"
	"testing"
)

func TestDescribePerABI(t *testing.T) {
	for _, tc := range []struct {
		abi                  int
		tcp, udp, unix, sigs string
	}{
		{3, "not enforceable", "not restricted", "not restricted", "not scoped"},
		{4, "denied", "not restricted", "not restricted", "not scoped"},
		{6, "denied", "not restricted", "abstract sockets outside the sandbox are unreachable; connecting", "denied"},
		{9, "denied", "not restricted", "abstract sockets outside the sandbox are unreachable; path sockets only", "denied"},
		{10, "denied", "denied", "abstract sockets outside the sandbox are unreachable; path sockets only", "denied"},
	} {
		e := describe(tc.abi, false)
		for _, c := range []struct{ got, want string }{{e.TCP, tc.tcp}, {e.UDP, tc.udp}, {e.UnixSockets, tc.unix}, {e.Signals, tc.sigs}} {
			if !strings.HasPrefix(c.got, c.want) {
				t.Errorf("ABI %d: %q, want it to start with %q", tc.abi, c.got, c.want)
			}
		}
		if tc.abi < 10 && !strings.Contains(strings.Join(e.NotEnforced, "|"), "UDP") {
			t.Errorf("ABI %d: UDP missing from notEnforced %v", tc.abi, e.NotEnforced)
		}
	}
	if e := describe(7, true); !strings.HasPrefix(e.TCP, "allowed") || !strings.HasPrefix(e.UDP, "allowed") {
		t.Errorf("network on: %+v", e)
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
