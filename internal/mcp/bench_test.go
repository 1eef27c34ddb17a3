package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchExec measures one command through the whole in-process stack: local
// shell, relay, MCP encoding and a client decoding the reply once.
func benchExec(b *testing.B, cmd string, want int) {
	f := newServer(b, 0)
	c := f.client(b)
	s := connect(b, c, "bench")
	args := map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": cmd}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec", Arguments: args})
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			Result struct{ Stdout string } `json:"result"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &r); err != nil || len(r.Result.Stdout) != want {
			b.Fatalf("%v: %d bytes", err, len(r.Result.Stdout))
		}
	}
	b.SetBytes(int64(want))
}

func BenchmarkExecTrue(b *testing.B) { benchExec(b, "true", 0) }
func BenchmarkExecSeq(b *testing.B)  { benchExec(b, "seq 1 100000", 588895) }
