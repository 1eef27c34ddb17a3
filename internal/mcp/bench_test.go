package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
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

func heapNow() uint64 {
	var m runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeap reports what one session at rest costs in tandem's heap
// and how the heap moves over 1,000 commands (server and client share the
// process here, so both are counted: an upper bound).
func BenchmarkHeap(b *testing.B) {
	for i := 0; i < b.N; i++ {
		f := newServer(b, 0)
		c := f.client(b)
		base := heapNow()
		const n = 10
		var ss []mcptest.Session
		for j := 0; j < n; j++ {
			s := connect(b, c, fmt.Sprintf("rest-%d", j))
			mcptest.Result(b, exec(b, c, s, "echo warm; ls /"))
			ss = append(ss, s)
		}
		perSession := float64(heapNow()-base) / n
		before := heapNow()
		for j := 0; j < 1000; j++ {
			benchCall(b, c, ss[0], "echo hello")
		}
		after := heapNow()
		growth := float64(int64(after)-int64(before)) / (1 << 20)
		b.ReportMetric(perSession/(1<<10), "KiB/session-at-rest")
		b.ReportMetric(growth, "MiB-growth/1000-cmds")
		b.Logf("one session at rest: %.0f KiB of heap; heap growth over 1,000 commands: %.2f MiB", perSession/(1<<10), growth)
	}
}

func benchCall(b *testing.B, c *mcptest.Client, s mcptest.Session, cmd string) {
	res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec",
		Arguments: map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": cmd}})
	if err != nil || res.IsError {
		b.Fatalf("%s: %v", cmd, err)
	}
}

// BenchmarkAuditedCalls: sequential ssh_list_sessions calls, each audited
// (hash-chained, committed to SQLite) before its reply. Run with
// -benchtime 10000x for the README figure.
func BenchmarkAuditedCalls(b *testing.B) {
	f := newServer(b, 0)
	st, err := sqlite.Open(context.Background(), b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	f.srv = mcp.New(mcp.Deps{Sessions: f.sessions, Audit: audit.New(st), InlineOutputBytes: config.DefaultInlineOutputBytes,
		MonitorURL: func(string) string { return "" }})
	c := f.client(b)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_list_sessions", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
	b.StopTimer()
	if n, err := audit.Verify(context.Background(), st); err != nil || n != int64(b.N) {
		b.Fatalf("verify: %d records, %v", n, err)
	}
}
