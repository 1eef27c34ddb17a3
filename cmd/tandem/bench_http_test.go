package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// localHTTP starts `tandem serve --http` with one local target, "local",
// on a fresh workspace, under the same policy: BenchmarkTSClient's HTTP
// twin of its stdio tandem. It logs at info, as the stdio one does.
func localHTTP(b *testing.B) *httpServer {
	b.Helper()
	return startHTTP(b, httpOpts{
		config: benchPolicy(b.TempDir()),
		args:   []string{"--log-level", "info"},
	})
}

// benchToken mints a token that outlives any benchmark run.
func (s *httpServer) benchToken(b *testing.B, tenant, actor string) string {
	b.Helper()
	return s.token(b, "--tenant", tenant, "--actor", actor, "--ttl", "1h")
}

// clientPorts returns the local ports of the TCP connections clients have
// made to s, as /proc/net/tcp{,6} holds them: open ones and those closed
// within the last minute (TIME_WAIT). Over a keep-alive run it stays at a
// handful however many requests were sent.
func (s *httpServer) clientPorts(b *testing.B) map[string]bool {
	b.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		b.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		b.Fatal(err)
	}
	srvPort := fmt.Sprintf("%04X", port)
	ports := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // no IPv6
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st ...: addresses are HEXIP:HEXPORT.
			fields := strings.Fields(line)
			if len(fields) < 4 || fields[3] == "0A" { // 0A is LISTEN
				continue
			}
			_, local, _ := strings.Cut(fields[1], ":")
			_, remote, _ := strings.Cut(fields[2], ":")
			switch srvPort {
			case remote: // the client's end
				ports[local] = true
			case local: // the server's end, or its TIME_WAIT
				ports[remote] = true
			}
		}
	}
	return ports
}

// procTree returns pid and all its descendants, from the PPid of every
// /proc/*/stat.
func procTree(b *testing.B, pid int) []int {
	b.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		b.Fatal(err)
	}
	children := map[int][]int{}
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // exited since the glob
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		var fields []string
		if i := strings.LastIndexByte(string(data), ')'); i >= 0 {
			fields = strings.Fields(string(data[i+1:]))
		}
		if len(fields) < 2 {
			b.Fatalf("%s: unexpected format: %q", f, data)
		}
		child, err1 := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		parent, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil {
			b.Fatalf("%s: unexpected format: %q", f, data)
		}
		children[parent] = append(children[parent], child)
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// procFileKB reads one "Name:   123 kB" line of a /proc file, such as
// VmRSS of status or Pss of smaps_rollup; ok is false when the process has
// gone or the line is missing.
func procFileKB(path, field string) (kb int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), field+":"); found {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

// BenchmarkIdleSessionsRSS is the HTTP server's memory at rest: 10 tenants,
// each with its own local target and workspace, 10 warmed sessions each
// (100 in all, every one has run a command), then nothing. The 200 MiB
// target applies to the tandem server process's own RSS: that is what
// grows with tenants and sessions. Each local session is also a process
// of its own (tandem re-execs itself to enter the sandbox, then execs the
// session's bash), so the process tree's total is reported beside it: as
// the sum of RSS, which counts the pages those processes share once per
// process, and as the sum of PSS, which shares them out.
func BenchmarkIdleSessionsRSS(b *testing.B) {
	const tenants, perTenant = 10, 10
	const targetMiB = 200
	var yaml strings.Builder
	yaml.WriteString("tenants:\n")
	for t := range tenants {
		fmt.Fprintf(&yaml, "  - name: t%d\n    targets:\n      - {name: build, kind: local, workspace: %s}\n", t, b.TempDir())
	}
	for i := 0; i < b.N; i++ {
		s := startHTTP(b, httpOpts{config: yaml.String(), args: []string{"--log-level", "info"}})
		for t := range tenants {
			c := s.client(b, s.benchToken(b, fmt.Sprintf("t%d", t), "idle"))
			for j := range perTenant {
				name := fmt.Sprintf("idle%d", j)
				r := mustOK(b, c.Call(b, "ssh_connect", map[string]any{"name": name}))
				sn := mcptest.Session{Name: name, Token: str(r["sessionToken"])}
				if r := result(b, c.Call(b, "ssh_exec", execArgs(sn, "echo warm"))); r["stdout"] != "warm\n" {
					b.Fatalf("t%d/%s: %v", t, name, mcptest.Short(r))
				}
			}
		}
		time.Sleep(time.Second) // the last replies' work (audit, logs) settles; then the server is idle

		pid := s.cmd.Process.Pid
		server, ok := procFileKB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
		if !ok {
			b.Fatalf("no VmRSS for the tandem server (pid %d)", pid)
		}
		var treeRSS, treePSS int64
		tree := procTree(b, pid)
		for _, p := range tree {
			rss, _ := procFileKB(fmt.Sprintf("/proc/%d/status", p), "VmRSS")
			pss, _ := procFileKB(fmt.Sprintf("/proc/%d/smaps_rollup", p), "Pss")
			treeRSS, treePSS = treeRSS+rss, treePSS+pss
		}
		mib := func(kb int64) float64 { return float64(kb) / 1024 }
		verdict := "met"
		if mib(server) > targetMiB {
			verdict = "MISSED"
		}
		b.ReportMetric(mib(server), "server-RSS-MiB")
		b.ReportMetric(mib(treeRSS), "tree-RSS-MiB")
		b.ReportMetric(mib(treePSS), "tree-PSS-MiB")
		b.Logf("%d idle sessions across %d tenants over HTTP: tandem server RSS %.1f MiB (target <= %d MiB: %s); "+
			"whole tree, %d processes: RSS sum %.1f MiB, PSS sum %.1f MiB",
			tenants*perTenant, tenants, mib(server), targetMiB, verdict, len(tree), mib(treeRSS), mib(treePSS))
	}
}

// answerPing answers an MCP ping the way tandem's stateless endpoint does
// (one SSE event), with no work behind it: the HTTP floor's server.
func answerPing(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
}

// goPOSTFloor is the go-sdk column's HTTP floor: one POST with Go's default
// keep-alive transport, as the go-sdk client sends, body read to the end.
func goPOSTFloor(b *testing.B, url string) time.Duration {
	b.Helper()
	t0 := time.Now()
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	d := time.Since(t0)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %v %v", url, resp.Status, err)
	}
	return d
}
