package main

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "7fcf8f5d0b1e2a3c4d5e6f708192a3b4c5d6e7f8"}, {Key: "vcs.time", Value: "2026-11-26T15:00:00Z"}}
	tests := []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          string
	}{
		{"stamped at link time", "1.4.0", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev},
			"1.4.0 (revision 7fcf8f5d0b1e, 2026-11-26T15:00:00Z)"},
		{"module version from go install", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}},
			"v1.4.0 (no VCS revision recorded: built with go run or outside a git checkout)"},
		{"a checkout with changes", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261126150000-7fcf8f5d0b1e+dirty"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			"v0.0.0-20261126150000-7fcf8f5d0b1e+dirty (revision 7fcf8f5d0b1e, 2026-11-26T15:00:00Z, with uncommitted changes)"},
		{"go run", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"dev (no VCS revision recorded: built with go run or outside a git checkout)"},
		{"no build info", "dev", nil, "dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.stamped, tc.bi); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
