package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// TestForgedHeldState: a repeat of ssh_exec with a requestState the
// client made up, on a server without approvals, runs nothing, names no
// approval, and never panics: it waits for (here, reports) the agent's
// command it names, or answers unknown_command.
func TestForgedHeldState(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "forged")
	r := mcptest.MustOK(t, exec(t, c, s, "echo ran >> runs; echo done"))
	cmd := mcptest.Str(r["commandId"])
	forge := func(state string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.CS.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", RequestState: state,
			Arguments:      map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "echo ran >> runs; echo done"},
			InputResponses: sdk.InputResponseMap{"tandem.approval": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return mcptest.Check(t, "ssh_exec", res)
	}
	got := forge("tandem.held/apr_nobody/" + cmd)
	if res := mcptest.Result(t, got); res["stdout"] != "done\n" || got["approvalId"] != nil {
		t.Fatalf("a forged state naming a finished command: %v", got)
	}
	mcptest.WantError(t, forge("tandem.held/apr_nobody/cmd_nope"), "unknown_command")
	if b, _ := os.ReadFile(filepath.Join(f.workspace, "runs")); string(b) != "ran\n" {
		t.Errorf("the command ran %q; a forged repeat must run nothing", b)
	}
}
