package transfer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// BenchmarkFiles: Put and a whole read (File.WriteTo) of 100 MiB through
// Files, over OpenSSH's sftp subsystem on a loopback sshd and through the
// local sandbox's file server, beside scp of the same file to the same
// sshd: what the transfer layer moves, before any MCP encoding (see
// cmd/tandem BenchmarkTransfer for the tools end to end). Medians of 3, in
// MB/s (10^6 bytes). Run with -benchtime 1x.
func BenchmarkFiles(b *testing.B) {
	ctx := context.Background()
	blob := make([]byte, 100<<20)
	rand.Read(blob)
	base := b.TempDir()
	ws, runDir := filepath.Join(base, "ws"), filepath.Join(base, "run")
	for _, d := range []string{ws, runDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	srv := testenv.SSHD(b)
	src := filepath.Join(base, "src.bin")
	if err := os.WriteFile(src, blob, 0o644); err != nil {
		b.Fatal(err)
	}
	scpArgs := []string{"-q", "-i", srv.ClientKeyFile, "-P", fmt.Sprint(srv.Port), "-o", "UserKnownHostsFile=" + srv.KnownHostsFile,
		"-o", "StrictHostKeyChecking=accept-new", "-o", "BatchMode=yes"}
	timed := func(f func()) float64 {
		start := time.Now()
		f()
		return float64(len(blob)) / 1e6 / time.Since(start).Seconds()
	}
	scp := func(from, to string) {
		if out, err := exec.Command("scp", append(scpArgs, from, to)...).CombinedOutput(); err != nil {
			b.Fatalf("scp: %v\n%s", err, out)
		}
	}
	remote := fmt.Sprintf("%s@%s:%s", srv.User, srv.Host, filepath.Join(base, "scp.bin"))
	var ups, downs []float64
	for range 3 {
		ups = append(ups, timed(func() { scp(src, remote) }))
		downs = append(downs, timed(func() { scp(remote, filepath.Join(base, "back.bin")) }))
	}
	scpUp, scpDown := med(ups), med(downs)
	b.Logf("scp          up %7.1f MB/s  down %7.1f MB/s", scpUp, scpDown)
	for _, be := range backends(b, ws, runDir) {
		f := openFiles(b, be, ws)
		ups, downs = nil, nil
		for range 3 {
			ups = append(ups, timed(func() {
				if _, err := f.Put(ctx, be.name+".bin", bytes.NewReader(blob), transfer.PutOptions{Overwrite: true}); err != nil {
					b.Fatal(err)
				}
			}))
			var got bytes.Buffer
			got.Grow(len(blob))
			downs = append(downs, timed(func() {
				rf, err := f.Open(ctx, be.name+".bin")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(&got, rf); err != nil {
					b.Fatal(err)
				}
				rf.Close()
			}))
			if !bytes.Equal(got.Bytes(), blob) {
				b.Fatal("read back differs")
			}
		}
		up, down := med(ups), med(downs)
		b.Logf("files %-5s  up %7.1f MB/s  down %7.1f MB/s  = %.2fx and %.2fx scp", be.name, up, down, up/scpUp, down/scpDown)
		b.ReportMetric(up/scpUp, be.name+"-up-x-scp")
		b.ReportMetric(down/scpDown, be.name+"-down-x-scp")
	}
}

func med(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
