package mcp

import (
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/session"
)

// TestBusyCommandClipped: a session_busy reply names the human's running
// command within a gate entry's size, says when it cut it, and points to
// the whole line (a pasted block can be a megabyte).
func TestBusyCommandClipped(t *testing.T) {
	tests := []struct {
		name    string
		command string
		cut     bool
	}{
		{"short", "sleep 30", false},
		{"at the bound", strings.Repeat("x", gateCommandBytes), false},
		{"a pasted block", strings.Repeat("echo pasted\n", 100_000), true},
		{"cut inside a character", strings.Repeat("é", gateCommandBytes), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := busyFailure(&session.BusyError{Kind: session.BusyHuman, Command: tc.command, CommandID: "cmd_1"}).reply()
			got := r["runningCommand"].(string)
			if len(got) > gateCommandBytes || !strings.HasPrefix(tc.command, got) || (r["runningCommandTruncated"] == true) != tc.cut {
				t.Errorf("runningCommand of %d bytes (truncated %v) for a command of %d", len(got), r["runningCommandTruncated"], len(tc.command))
			}
			if len(got) < gateCommandBytes-2 && tc.cut {
				t.Errorf("cut to %d bytes, want about %d", len(got), gateCommandBytes)
			}
		})
	}
}
