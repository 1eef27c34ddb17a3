package mcp

import "testing"

// TestHeldState: the requestState of a held call round-trips, and
// nothing else reads as one: a repeat that is not a held call's must be
// served as a new call, and a held call's repeat never as one.
func TestHeldState(t *testing.T) {
	apr, cmd, ok := parseHeldState(heldState("apr_x", "cmd_y"))
	if !ok || apr != "apr_x" || cmd != "cmd_y" {
		t.Fatalf("round trip: %q %q %v", apr, cmd, ok)
	}
	for _, s := range []string{"", "tandem.held/", "tandem.held/apr_x", "tandem.held//cmd_y", "tandem.held/apr_x/", "held/apr_x/cmd_y", "TANDEM.HELD/a/b"} {
		if a, c, ok := parseHeldState(s); ok {
			t.Errorf("%q reads as a held state (%q, %q)", s, a, c)
		}
	}
}

// FuzzHeldState: any state either fails to parse or parses to ids that
// make the same state again.
func FuzzHeldState(f *testing.F) {
	f.Add("tandem.held/apr_x/cmd_y")
	f.Add("tandem.held/a/b/c")
	f.Fuzz(func(t *testing.T, s string) {
		apr, cmd, ok := parseHeldState(s)
		if ok && (apr == "" || cmd == "" || heldState(apr, cmd) != s) {
			t.Fatalf("%q parsed to %q, %q", s, apr, cmd)
		}
	})
}
