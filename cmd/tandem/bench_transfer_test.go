package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// BenchmarkTransfer: ssh_upload and ssh_download of 100 MiB through the
// go-sdk client over stdio, over SSH (a loopback sshd) and in a local
// sandboxed session, beside scp of the same 100 MiB to the same sshd.
//
// One call moves at most limits.uploadBytes (50 MiB by default), so
// 100 MiB is two files of 50 MiB: two ssh_upload calls (base64 in JSON),
// and two ssh_download calls, each hashing the file and naming a resource,
// then its pages read with resources/read. The time is the client's, from
// the first call to the last byte, encoding and decoding included. scp
// moves one 100 MiB file. Each figure is the median of 3 runs, in MB/s
// (10^6 bytes), with the ratio to scp's (target: at least 0.7).
//
// Run with -benchtime 1x.
func BenchmarkTransfer(b *testing.B) {
	const half = 50 << 20
	blob := make([]byte, 2*half)
	rand.Read(blob)
	d := testenv.SSHD(b)
	src := filepath.Join(b.TempDir(), "blob.bin")
	if err := os.WriteFile(src, blob, 0o644); err != nil {
		b.Fatal(err)
	}
	scpUp, scpDown := xferSCP(b, d, src, blob)
	b.Logf("scp                 up %7.1f MB/s  down %7.1f MB/s", scpUp, scpDown)
	b.ReportMetric(scpUp, "scp-up-MB/s")
	b.ReportMetric(scpDown, "scp-down-MB/s")

	for _, tg := range []struct {
		name   string
		params map[string]any
	}{
		{"local", map[string]any{}},
		{"ssh", map[string]any{"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile}},
	} {
		srv := startServer(b, serverOpts{logLevel: "warn"})
		tg.params["name"] = "bench"
		r := mustOK(b, srv.call(b, "ssh_connect", tg.params))
		sess := map[string]any{"sessionName": "bench", "sessionToken": str(r["sessionToken"])}
		dir := "tb-" + randomOf(b, alnum, 8)
		ws := str(result(b, mustOK(b, srv.call(b, "ssh_exec", xferArgs(sess, "command", "mkdir "+dir+" && pwd -P"))))["stdout"])
		b.Cleanup(func() { _ = os.RemoveAll(filepath.Join(xferTrimNL(ws), dir)) })
		parts := [][]byte{blob[:half], blob[half:]}
		encoded := []string{base64.StdEncoding.EncodeToString(parts[0]), base64.StdEncoding.EncodeToString(parts[1])}
		var ups, downs []float64
		for run := range 3 {
			start := time.Now()
			for i, e := range encoded {
				mustOK(b, srv.call(b, "ssh_upload", xferArgs(sess, "path", fmt.Sprintf("%s/part%d", dir, i), "content", e, "encoding", "base64", "overwrite", true)))
			}
			ups = append(ups, xferMBps(len(blob), time.Since(start)))
			start = time.Now()
			var got []byte
			for i := range parts {
				dl := mustOK(b, srv.call(b, "ssh_download", xferArgs(sess, "path", fmt.Sprintf("%s/part%d", dir, i))))
				got = append(got, xferPages(b, srv, dl["resource"].(map[string]any))...)
			}
			downs = append(downs, xferMBps(len(blob), time.Since(start)))
			if !bytes.Equal(got, blob) {
				b.Fatalf("%s run %d: downloaded bytes differ", tg.name, run)
			}
		}
		up, down := xferMedian(ups), xferMedian(downs)
		b.Logf("tandem %-5s (MCP) up %7.1f MB/s  down %7.1f MB/s  = %.2fx and %.2fx scp", tg.name, up, down, up/scpUp, down/scpDown)
		b.ReportMetric(up, tg.name+"-up-MB/s")
		b.ReportMetric(down, tg.name+"-down-MB/s")
		b.ReportMetric(up/scpUp, tg.name+"-up-x-scp")
		b.ReportMetric(down/scpDown, tg.name+"-down-x-scp")
	}
}

// xferSCP copies src to the sshd and back three times each with scp
// (the same key and sshd), returning the median MB/s of each way.
func xferSCP(b *testing.B, d *testenv.SSHDServer, src string, blob []byte) (up, down float64) {
	b.Helper()
	remote := filepath.Join(b.TempDir(), "scp-remote.bin")
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
	var ups, downs []float64
	for range 3 {
		ups = append(ups, xferMBps(len(blob), run(src, target+remote)))
		downs = append(downs, xferMBps(len(blob), run(target+remote, back)))
	}
	if got, _ := os.ReadFile(back); !bytes.Equal(got, blob) {
		b.Fatal("scp's copy differs")
	}
	return xferMedian(ups), xferMedian(downs)
}

// xferPages reads every page of a download's resource.
func xferPages(b *testing.B, srv *tandemProc, res map[string]any) []byte {
	b.Helper()
	uri, pages := str(res["uri"]), int(res["pages"].(float64))
	var all []byte
	for p := range pages {
		rr, err := srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: fmt.Sprintf("%s?page=%d", uri, p)})
		if err != nil {
			b.Fatalf("read %s page %d: %v", uri, p, err)
		}
		all = append(all, rr.Contents[0].Blob...)
	}
	return all
}

func xferArgs(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func xferMBps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func xferMedian(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func xferTrimNL(s string) string { return string(bytes.TrimRight([]byte(s), "\n")) }
