package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkNetNamespace measures what a network namespace per session
// costs: a local `echo hello` and a session's start (ssh_connect until
// its shell is ready), in a session with a namespace of its own (network:
// false), one under the fallback filter (TANDEM_NETNS=off) and one on the
// host's network (network: true, no namespace, as every session ran
// before namespaces). Calls are interleaved, so all three see the same
// machine noise; medians and their ratios to the host's are reported.
// Targets: echo within 1.1x, start within 1.2x. Run with `make bench`.
func BenchmarkNetNamespace(b *testing.B) {
	ws := b.TempDir()
	cfg := egressConfig(ws, map[string]string{"ns": "false", "host": "true"}, "allowAdHoc: false\n")
	srv := startServer(b, serverOpts{dir: ws, config: cfg, logLevel: "info"})
	fb := startServer(b, serverOpts{dir: ws, config: cfg, logLevel: "info", env: []string{"TANDEM_NETNS=off"}})
	kinds := []struct {
		name   string
		srv    *tandemProc
		target string
	}{{"namespace", srv, "ns"}, {"fallback filter", fb, "ns"}, {"host network", srv, "host"}}

	const echoes, starts = 300, 40
	var report strings.Builder
	for i := 0; i < b.N; i++ {
		echo := make([]latencies, len(kinds))
		start := make([]latencies, len(kinds))
		sessions := make([]sess, len(kinds))
		for k, kind := range kinds {
			sessions[k] = connectTo(b, kind.srv, kind.target, fmt.Sprintf("echo-%d-%d", i, k))
		}
		for j := 0; j < echoes+10; j++ {
			for k, s := range sessions {
				t0 := time.Now()
				if n, _ := leanExec(b, s, "echo hello"); n != 6 {
					b.Fatalf("%s: echo hello gave %d bytes", kinds[k].name, n)
				}
				if j >= 10 { // warm-up excluded
					echo[k] = append(echo[k], time.Since(t0))
				}
			}
		}
		for _, s := range sessions {
			mustOK(b, s.srv.call(b, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))
		}
		for j := 0; j < starts+2; j++ {
			for k, kind := range kinds {
				name := fmt.Sprintf("start-%d-%d-%d", i, j, k)
				t0 := time.Now()
				s := connectTo(b, kind.srv, kind.target, name)
				d := time.Since(t0)
				mustOK(b, kind.srv.call(b, "ssh_disconnect", map[string]any{"sessionName": name, "sessionToken": s.tok}))
				if j >= 2 {
					start[k] = append(start[k], d)
				}
			}
		}
		report.Reset()
		fmt.Fprintf(&report, "\n%-16s | %-19s | %-19s | %s\n", "", "echo hello p50/p90", "session start p50/p90", "ratio to host (p50): echo, start")
		host := len(kinds) - 1
		for k, kind := range kinds {
			er := float64(echo[k].pct(.5)) / float64(echo[host].pct(.5))
			sr := float64(start[k].pct(.5)) / float64(start[host].pct(.5))
			fmt.Fprintf(&report, "%-16s | %7.2f / %7.2f ms | %7.2f / %7.2f ms   | %.2fx, %.2fx\n", kind.name,
				ms(echo[k].pct(.5)), ms(echo[k].pct(.9)), ms(start[k].pct(.5)), ms(start[k].pct(.9)), er, sr)
			if k != host {
				tag := strings.Fields(kind.name)[0]
				b.ReportMetric(er, tag+"-echo-ratio")
				b.ReportMetric(sr, tag+"-start-ratio")
			}
		}
	}
	b.Log(report.String())
}
