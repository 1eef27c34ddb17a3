package execguard_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// benchConnects is how many connects one run of BenchmarkUnixConnect makes.
const benchConnects = 2000

// BenchmarkUnixConnect runs one python3 that connects 2,000 times to a
// unix socket in its workspace, in the sandbox without the filter and with
// it (execs unjudged, as every session has it now: each connect is made by
// tandem on the process's behalf). It reports the time per connect each
// way and the difference, the cost of one connect's round trip.
func BenchmarkUnixConnect(b *testing.B) {
	if err := execguard.Available(); err != nil {
		b.Skip(err)
	}
	var off, on time.Duration
	for b.Loop() {
		off += runConnects(b, false)
		on += runConnects(b, true)
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(b.N) / benchConnects }
	b.ReportMetric(per(off), "µs/connect-off")
	b.ReportMetric(per(on), "µs/connect-on")
	b.ReportMetric(per(on)-per(off), "µs/connect-added")
}

// runConnects runs the connects once and returns how long python took
// for them (its own clock, start-up excluded).
func runConnects(b *testing.B, filter bool) time.Duration {
	b.Helper()
	ws := b.TempDir()
	sock := filepath.Join(ws, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	script := "import socket, sys, time\n" +
		"t = time.perf_counter()\n" +
		"for i in range(" + strconv.Itoa(benchConnects) + "):\n" +
		"    s = socket.socket(socket.AF_UNIX)\n    s.connect(sys.argv[1])\n    s.close()\n" +
		"print(int((time.perf_counter() - t) * 1e9))\n"
	p := sandbox.Policy{ReadWrite: []string{ws}, ReadOnly: sandbox.DefaultReadOnly()}
	var parent, child *os.File
	if filter {
		if parent, child, err = execguard.Pair(); err != nil {
			b.Fatal(err)
		}
		defer parent.Close()
		p.ExecFD, p.ExecsUnjudged = 3, true
	}
	cmd, err := sandbox.Command(self, p, []string{"python3", "-c", script, sock})
	if err != nil {
		b.Fatal(err)
	}
	cmd.Dir, cmd.Env = ws, []string{"PATH=/usr/bin:/bin"}
	if child != nil {
		cmd.ExtraFiles = []*os.File{child}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if child != nil {
		_ = child.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := execguard.Receive(ctx, parent)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		l.AllowSockets(execguard.SocketRules{UnixRoots: []string{ws}})
		sctx, scancel := context.WithCancel(context.Background())
		defer scancel()
		go func() { _ = l.Serve(sctx, nil) }()
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("%s: %v", cmd, err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		b.Fatalf("python: %v (%q)", err, out.String())
	}
	return time.Duration(ns)
}
