package main

import (
	"testing"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// TestIsolationTwoProcesses: two MCP clients, each with its own tandem
// process, see only their own sessions and cannot touch the other's.
func TestIsolationTwoProcesses(t *testing.T) {
	a, b := startServer(t, serverOpts{}), startServer(t, serverOpts{})
	tokA := str(mustOK(t, a.call(t, "ssh_connect", map[string]any{"name": "alpha"}))["sessionToken"])
	tokB := str(mustOK(t, b.call(t, "ssh_connect", map[string]any{"name": "beta"}))["sessionToken"])
	mcptest.AssertIsolated(t, &mcptest.Client{CS: a.cs}, &mcptest.Client{CS: b.cs},
		mcptest.Session{Name: "alpha", Token: tokA}, mcptest.Session{Name: "beta", Token: tokB})
}
