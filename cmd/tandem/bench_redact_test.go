package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRedactReply measures what redaction with the default patterns
// costs the bounded reply of `seq 1 100000` (588,895 bytes: head and tail
// inline, the rest spooled), through the TypeScript SDK as agents call:
// two tandems, one with the default patterns and one with redaction off
// (redact: {patterns: false}), each with a local session, called in turn.
// It prints the medians and the cost as a share of the reply without
// redaction (the bound: 15%).
func BenchmarkRedactReply(b *testing.B) {
	start := func(redact string) *tsClient {
		ws := b.TempDir()
		cfg := filepath.Join(b.TempDir(), "tandem.yaml")
		body := fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: %s}\n%s", ws, redact)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
		c := startTSClient(b, "serve", "--config", cfg, "--data-dir", b.TempDir(), "--web", "127.0.0.1:0", "--log-level", "info")
		c.mustDo(b, map[string]any{"op": "connect", "name": "local"})
		return c
	}
	on := start("")
	off := start("redact: {patterns: false}\n")
	const seq = "seq 1 100000"
	const warm, n = 10, 60
	call := func(c *tsClient) float64 {
		r := c.mustDo(b, map[string]any{"op": "exec", "session": "local", "command": seq})
		if r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("%s: exit code %v", seq, r.ExitCode)
		}
		return r.MS
	}
	for i := 0; i < b.N; i++ {
		var withRedact, without latencies
		for j := 0; j < warm+n; j++ {
			a, o := call(on), call(off)
			if j >= warm {
				withRedact, without = append(withRedact, msDur(a)), append(without, msDur(o))
			}
		}
		w, wo := withRedact.pct(0.5), without.pct(0.5)
		cost := float64(w-wo) / float64(wo) * 100
		fmt.Printf("seq 1 100000 bounded reply (TypeScript SDK, local, median of %d): default patterns %.2f ms, redaction off %.2f ms: redaction costs %+.1f%% (target ≤ 15%%)\n",
			n, ms(w), ms(wo), cost)
		b.ReportMetric(ms(w), "redact-ms")
		b.ReportMetric(ms(wo), "plain-ms")
		b.ReportMetric(cost, "redact-cost-%")
	}
}
