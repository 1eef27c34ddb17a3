package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// BenchmarkTransferTS: ssh_upload and ssh_download of 100 MiB through the
// TypeScript SDK (bench/client.mjs, the client most agents are built on)
// over stdio, over SSH (a loopback sshd) and in a local sandboxed session,
// taking turns with scp of the same 100 MiB to the same sshd, so that
// each run's ratio compares neighbours on a busy machine.
//
// As in BenchmarkTransfer, 100 MiB is two 50 MiB files (limits.uploadBytes):
// two ssh_upload calls (the client encodes the base64 before its clock
// starts, as an agent holds it already), and two ssh_download calls each
// followed by its resource's pages, decoded to bytes and checked.
//
// With TANDEM_BENCH_BASELINE set to another tandem binary (a build of an
// earlier commit), that binary takes its turn in every run too: before
// and after, measured side by side. TANDEM_BENCH_RUNS sets the runs (5);
// each figure is the median of the runs. With TANDEM_CPUPROFILE=DIR each
// tandem writes its CPU profile to DIR/cpu-NAME.pprof.
//
// A row "floor-server" runs the same calls against bench/floor.mjs, a
// server that does only the work any server must (see there), so the row
// is the ceiling of what any server reaches through this client here.
//
// Run with -benchtime 1x.
func BenchmarkTransferTS(b *testing.B) {
	const half = 50 << 20
	runs := 5
	if n, err := strconv.Atoi(os.Getenv("TANDEM_BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	blob := make([]byte, 2*half)
	rand.Read(blob)
	d := testenv.SSHD(b)
	dir := b.TempDir()
	src := filepath.Join(dir, "blob.bin")
	parts := []string{filepath.Join(dir, "part0"), filepath.Join(dir, "part1")}
	sums := make([]string, 2)
	for i, p := range parts {
		chunk := blob[i*half : (i+1)*half]
		if err := os.WriteFile(p, chunk, 0o644); err != nil {
			b.Fatal(err)
		}
		h := sha256.Sum256(chunk)
		sums[i] = hex.EncodeToString(h[:])
	}
	if err := os.WriteFile(src, blob, 0o644); err != nil {
		b.Fatal(err)
	}

	type build struct{ name, program string }
	builds := []build{{"tandem", binary}}
	if old := os.Getenv("TANDEM_BENCH_BASELINE"); old != "" {
		builds = append(builds, build{"baseline", old})
	}
	type lane struct {
		name     string
		ts       *tsClient
		sess     map[string]any
		ups, dns []float64
	}
	var lanes []*lane
	profDir := os.Getenv("TANDEM_CPUPROFILE")
	for _, target := range []string{"local", "ssh"} {
		for _, bd := range builds {
			name := bd.name + "-" + target
			var env []string
			if profDir != "" {
				env = append(env, "TANDEM_CPUPROFILE="+filepath.Join(profDir, "cpu-"+name+".pprof"))
			}
			ts := startTSClientCmd(b, env, bd.program, "serve", "--data-dir", b.TempDir(), "--web", "127.0.0.1:0", "--log-level", "warn")
			connect := map[string]any{"op": "connect", "name": "bench"}
			if target == "ssh" {
				for k, v := range map[string]any{"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile} {
					connect[k] = v
				}
			}
			tok := ts.mustDo(b, connect).Token
			sess := map[string]any{"sessionName": "bench", "sessionToken": tok}
			r := ts.mustDo(b, map[string]any{"op": "call", "tool": "ssh_exec", "args": xferArgs(sess, "command", "pwd -P")})
			ws := xferTrimNL(str(r.Reply["result"].(map[string]any)["stdout"]))
			sub := "tts-" + randomOf(b, alnum, 8)
			b.Cleanup(func() { _ = os.RemoveAll(filepath.Join(ws, sub)) })
			sess["dir"] = sub
			lanes = append(lanes, &lane{name: name, ts: ts, sess: sess})
		}
	}

	// The floor: bench/floor.mjs, a server that does only what any server
	// must (decode and hash an upload; read, hash and page a download as
	// base64), behind the same client. Its figures are the most any
	// server reaches through the TypeScript SDK on this machine.
	floorScript, err := filepath.Abs(filepath.Join(benchDir, "floor.mjs"))
	if err != nil {
		b.Fatal(err)
	}
	floor := startTSClientCmd(b, nil, tsNodeModules(b), floorScript, dir)
	floor.mustDo(b, map[string]any{"op": "connect", "name": "bench"})
	lanes = append(lanes, &lane{name: "floor-server", ts: floor, sess: map[string]any{"sessionName": "bench", "sessionToken": "floor", "dir": "floor"}})

	var scpUps, scpDowns []float64
	remote := filepath.Join(b.TempDir(), "scp-remote.bin")
	for run := range runs {
		up, down := xferSCPOnce(b, d, src, remote)
		scpUps, scpDowns = append(scpUps, up), append(scpDowns, down)
		for i := range lanes {
			// Each run starts with another lane, so that no build always
			// follows the same neighbour.
			l := lanes[(i+run)%len(lanes)]
			sess := map[string]any{"sessionName": l.sess["sessionName"], "sessionToken": l.sess["sessionToken"]}
			var ms float64
			for p, file := range parts {
				r := l.ts.mustDo(b, map[string]any{"op": "upload", "file": file,
					"args": xferArgs(sess, "path", fmt.Sprintf("%s/part%d", l.sess["dir"], p), "overwrite", true)})
				if r.Reply["sha256"] != sums[p] {
					b.Fatalf("%s: upload of part %d: sha256 %v, want %s", l.name, p, r.Reply["sha256"], sums[p])
				}
				ms += r.MS
			}
			l.ups = append(l.ups, xferMBps(len(blob), time.Duration(ms*float64(time.Millisecond))))
			ms = 0
			for p := range parts {
				r := l.ts.mustDo(b, map[string]any{"op": "download", "args": xferArgs(sess, "path", fmt.Sprintf("%s/part%d", l.sess["dir"], p))})
				if r.SHA256 != sums[p] || r.Bytes != half {
					b.Fatalf("%s: download of part %d: %d bytes, sha256 %s, want %d, %s", l.name, p, r.Bytes, r.SHA256, half, sums[p])
				}
				ms += r.MS
			}
			l.dns = append(l.dns, xferMBps(len(blob), time.Duration(ms*float64(time.Millisecond))))
		}
	}
	scpUp, scpDown := xferMedian(scpUps), xferMedian(scpDowns)
	b.Logf("scp                 up %7.1f MB/s  down %7.1f MB/s (runs: %s / %s)", scpUp, scpDown, xferList(scpUps), xferList(scpDowns))
	b.ReportMetric(scpUp, "scp-up-MB/s")
	b.ReportMetric(scpDown, "scp-down-MB/s")
	for _, l := range lanes {
		up, down := xferMedian(l.ups), xferMedian(l.dns)
		var rup, rdn []float64
		for i := range l.ups {
			rup, rdn = append(rup, l.ups[i]/scpUps[i]), append(rdn, l.dns[i]/scpDowns[i])
		}
		b.Logf("%-15s TS SDK up %7.1f MB/s  down %7.1f MB/s  = %.2fx and %.2fx scp (runs: %s / %s; ratios %s / %s)",
			l.name, up, down, xferMedian(rup), xferMedian(rdn), xferList(l.ups), xferList(l.dns), xferList(rup), xferList(rdn))
		b.ReportMetric(up, l.name+"-up-MB/s")
		b.ReportMetric(down, l.name+"-down-MB/s")
		b.ReportMetric(xferMedian(rup), l.name+"-up-x-scp")
		b.ReportMetric(xferMedian(rdn), l.name+"-down-x-scp")
	}
}

// xferSCPOnce copies src to the sshd and back once with scp, in MB/s.
func xferSCPOnce(b *testing.B, d *testenv.SSHDServer, src, remote string) (up, down float64) {
	b.Helper()
	back := filepath.Join(b.TempDir(), "scp-back.bin")
	base := []string{"-q", "-i", d.ClientKeyFile, "-P", fmt.Sprint(d.Port), "-o", "UserKnownHostsFile=" + d.KnownHostsFile,
		"-o", "StrictHostKeyChecking=accept-new", "-o", "BatchMode=yes"}
	run := func(args ...string) time.Duration {
		start := time.Now()
		if out, err := exec.Command("scp", append(base, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("scp %v: %v\n%s", args, err, out)
		}
		return time.Since(start)
	}
	target := fmt.Sprintf("%s@%s:", d.User, d.Host)
	fi, err := os.Stat(src)
	if err != nil {
		b.Fatal(err)
	}
	up = xferMBps(int(fi.Size()), run(src, target+remote))
	down = xferMBps(int(fi.Size()), run(target+remote, back))
	_ = os.Remove(back)
	return up, down
}

func xferList(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatFloat(x, 'f', 2, 64)
	}
	return s
}
