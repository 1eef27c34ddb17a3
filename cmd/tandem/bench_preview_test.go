package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// BenchmarkPreviewLatency: what a preview adds to a request. A dev
// server (devServerPy, HTTP/1.1 keep-alive, a small page) runs in each of
// three sessions, once with TCP_NODELAY (as Node's servers) and once with
// Nagle's algorithm on (as python -m http.server): a local one on the host's network (network: true),
// which the benchmark also asks directly, the floor; a sandboxed local
// one, reached inside its network namespace through the socket helper;
// and one over SSH, on the remote's loopback through a direct-tcpip
// channel. Each is asked through its preview URL by a browser-like client
// let in as the operator. Requests are interleaved, so all see the same
// machine noise; medians (p50) and the added latency over the direct
// request are reported. Target: at most 2 ms added at the median. Run
// with `make bench`.
func BenchmarkPreviewLatency(b *testing.B) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		testenv.Missing(b, "python3 is needed: %v", err)
	}
	ws := b.TempDir()
	d := testenv.SSHD(b)
	for _, dir := range []string{ws, d.Home} {
		if err := os.WriteFile(filepath.Join(dir, "devserver.py"), []byte(devServerPy), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg := "targets: [{name: ns, kind: local, workspace: " + ws + "}, {name: host, kind: local, workspace: " + ws + ", network: true}]\n"
	srv := startServer(b, serverOpts{config: cfg, logLevel: "info"})
	op := dataDirToken(b, srv.dataDir)
	type way struct {
		name  string
		c     *http.Client
		url   string
		floor int // the index of its direct request
	}
	var ways []way
	sessions := map[string]sess{}
	// Each server twice: with TCP_NODELAY, as Node's HTTP servers set it,
	// and with Nagle's algorithm on, as python -m http.server leaves it.
	for _, nagle := range []string{"", "nagle"} {
		hostPort := freePort(b)
		floor := len(ways)
		ways = append(ways, way{"direct" + suffix(nagle), &http.Client{Timeout: 10 * time.Second}, "http://127.0.0.1:" + strconv.Itoa(hostPort) + "/landed", floor})
		for _, k := range []struct {
			name, target, dir string
			port              int
		}{{"host network", "host", ws, hostPort}, {"namespace", "ns", ws, 3000 + len(ways)}, {"ssh", "", d.Home, freePort(b)}} {
			s, ok := sessions[k.name]
			switch {
			case ok:
			case k.target == "":
				r := mustOK(b, srv.call(b, "ssh_connect", map[string]any{"name": "bench-ssh", "host": d.Host, "port": d.Port,
					"username": d.User, "keyFilePath": d.ClientKeyFile}))
				s = sess{srv, "bench-ssh", str(r["sessionToken"])}
			default:
				s = connectTo(b, srv, k.target, "bench-"+k.target)
			}
			sessions[k.name] = s
			port := strconv.Itoa(k.port)
			mustOK(b, s.exec(b, "cd "+k.dir+" && (python3 devserver.py "+port+" "+nagle+" >devserver-"+port+".log 2>&1 &)"))
			var fw map[string]any
			for deadline := time.Now().Add(20 * time.Second); fw["listening"] != true; time.Sleep(50 * time.Millisecond) {
				fw = mustOK(b, srv.call(b, "ssh_forward_port", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "port": k.port}))
				if time.Now().After(deadline) {
					b.Fatalf("%s: the dev server never listened: %v", k.name, fw)
				}
			}
			c, addr := enterPreview(b, str(fw["url"]), op)
			ways = append(ways, way{"preview, " + k.name + suffix(nagle), c, "http://" + addr + "/landed", floor})
		}
	}

	const requests, warmup = 1000, 50
	var report strings.Builder
	for i := 0; i < b.N; i++ {
		lat := make([]latencies, len(ways))
		for j := 0; j < requests+warmup; j++ {
			for k, w := range ways {
				t0 := time.Now()
				res, err := w.c.Get(w.url)
				if err != nil {
					b.Fatalf("%s: %v", w.name, err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					b.Fatalf("%s: %d", w.name, res.StatusCode)
				}
				if j >= warmup {
					lat[k] = append(lat[k], time.Since(t0))
				}
			}
		}
		report.Reset()
		fmt.Fprintf(&report, "\n%-32s | %-19s | %s\n", "GET /landed (keep-alive)", "p50 / p90", "added at p50")
		for k, w := range ways {
			added := ms(lat[k].pct(.5)) - ms(lat[w.floor].pct(.5))
			fmt.Fprintf(&report, "%-32s | %6.3f / %6.3f ms | %+.3f ms\n", w.name, ms(lat[k].pct(.5)), ms(lat[k].pct(.9)), added)
			if k != w.floor {
				b.ReportMetric(added, strings.NewReplacer("preview, ", "", ", ", "-", " ", "-").Replace(w.name)+"-added-ms")
			}
		}
	}
	b.Log(report.String())
}

// suffix names a dev server with Nagle's algorithm on.
func suffix(nagle string) string {
	if nagle != "" {
		return ", Nagle on"
	}
	return ""
}
