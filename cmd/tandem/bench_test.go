package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// benchUser is a login with a plain ~/.bashrc, so neither side pays for a
// heavy shell environment (pyenv and the like) that would skew the ratio.
const benchUser = "tandembench"

// lightUser returns a user whose shell environment is minimal: benchUser,
// created when running as root, else the current user.
func lightUser(b *testing.B) string {
	b.Helper()
	u, err := user.Current()
	if err != nil {
		b.Fatal(err)
	}
	if u.Uid != "0" {
		return u.Username
	}
	if _, err := user.Lookup(benchUser); err != nil {
		// "*" means no password login but, unlike useradd's "!", not a
		// locked account, which sshd without PAM would refuse.
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/bash", "-p", "*", benchUser).CombinedOutput(); err != nil {
			b.Fatalf("useradd: %v: %s", err, out)
		}
	}
	bu, err := user.Lookup(benchUser)
	if err != nil {
		b.Fatal(err)
	}
	rc := "# tandem benchmark user: deliberately empty\n"
	for _, f := range []string{".bashrc", ".profile"} {
		if err := os.WriteFile(filepath.Join(bu.HomeDir, f), []byte(rc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return benchUser
}

// leanExec calls ssh_exec and decodes the reply once, as an agent would.
// It returns the stdout's total size (stdoutBytes when the reply is
// bounded) and the reply, for codecTime.
func leanExec(b *testing.B, s sess, cmd string) (int, *sdk.CallToolResult) {
	res, err := s.srv.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec",
		Arguments: map[string]any{"sessionName": s.name, "sessionToken": s.tok, "command": cmd}})
	if err != nil {
		b.Fatal(err)
	}
	var r struct {
		Success bool
		Result  struct {
			Stdout      string
			StdoutBytes *int
		}
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &r); err != nil || !r.Success {
		b.Fatalf("%s: %v %s", cmd, err, res.Content[0].(*sdk.TextContent).Text)
	}
	if r.Result.StdoutBytes != nil { // bounded: head and tail inline, the size beside them
		return *r.Result.StdoutBytes, res
	}
	return len(r.Result.Stdout), res
}

// codecTime is the go-sdk's own JSON work on one reply, in this process,
// with no tandem, pipe or shell involved: the server's encoding of the
// result and of the JSON-RPC message, then the client's decoding of both.
// It shows how much of the MCP figure belongs to the SDK.
func codecTime(b *testing.B, res *sdk.CallToolResult) time.Duration {
	id, err := jsonrpc.MakeID(float64(1)) // a number, as decoded from JSON
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	result, err := json.Marshal(res)
	if err != nil {
		b.Fatal(err)
	}
	wire, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: result})
	if err != nil {
		b.Fatal(err)
	}
	msg, err := jsonrpc.DecodeMessage(wire)
	if err != nil {
		b.Fatal(err)
	}
	var back sdk.CallToolResult
	if err := json.Unmarshal(msg.(*jsonrpc.Response).Result, &back); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	s := slices.Clone(l)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchSSHD starts sshd for a latency benchmark and returns it with the
// light login (lightUser) that both tandem and the floor use, so neither
// side pays for a heavy shell environment.
func benchSSHD(b *testing.B) (*testenv.SSHDServer, string) {
	b.Helper()
	d := testenv.SSHD(b)
	login := lightUser(b)
	// sshd reads authorized_keys as the logging-in user: let it reach the
	// harness's file (a public key, not a secret).
	for dir := filepath.Dir(d.ClientKeyFile); dir != "/" && dir != os.TempDir(); dir = filepath.Dir(dir) {
		if err := os.Chmod(dir, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	keys, _ := filepath.Glob(filepath.Join(filepath.Dir(d.ClientKeyFile), "authorized_keys*"))
	for _, k := range keys {
		_ = os.Chmod(k, 0o644)
	}
	return d, login
}

// dialFloor opens the floor every latency figure is compared with: one
// persistent x/crypto/ssh connection to d as login, closed in b.Cleanup.
// The function it returns runs one command on its own exec channel and
// returns its stdout, which is the least any SSH tool can do per command.
func dialFloor(b *testing.B, d *testenv.SSHDServer, login string) func(cmd string) ([]byte, error) {
	b.Helper()
	signer, err := ssh.ParsePrivateKey(d.ClientKey)
	if err != nil {
		b.Fatal(err)
	}
	floor, err := ssh.Dial("tcp", d.Addr, &ssh.ClientConfig{User: login, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(d.HostPublicKey)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = floor.Close() })
	return func(cmd string) ([]byte, error) {
		sess, err := floor.NewSession()
		if err != nil {
			return nil, fmt.Errorf("floor session: %w", err)
		}
		defer sess.Close()
		var stdout, stderr bytes.Buffer
		sess.Stdout, sess.Stderr = &stdout, &stderr
		if err := sess.Run(cmd); err != nil {
			return stdout.Bytes(), fmt.Errorf("floor %q: %w (stderr: %s)", cmd, err, stderr.Bytes())
		}
		return stdout.Bytes(), nil
	}
}

// BenchmarkExecLatency compares ssh_exec through tandem (a real MCP client
// spawning the binary, over stdio, on a real sshd) with the floor: one
// persistent x/crypto/ssh connection opening an exec channel per command,
// to the same sshd and user. Calls are back to back and interleaved, so
// both sides see the same machine noise. Run it with `make bench`.
func BenchmarkExecLatency(b *testing.B) {
	d, login := benchSSHD(b)
	srv := startServer(b, serverOpts{logLevel: "info"}) // tandem's default
	r := mustOK(b, srv.call(b, "ssh_connect", map[string]any{"name": "bench", "host": d.Host, "port": d.Port, "username": login, "keyFilePath": d.ClientKeyFile}))
	s := sess{srv, "bench", str(r["sessionToken"])}
	floorExec := dialFloor(b, d, login)

	// The engine alone: tandem's shell over the same SSH, no MCP encoding.
	engine, err := shell.Start(context.Background(), &sshconn.Options{Host: d.Host, Port: d.Port, User: login,
		PrivateKey: d.ClientKey, KnownHostsFile: filepath.Join(b.TempDir(), "known_hosts")}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = engine.Close() })

	cases := []struct {
		cmd  string
		n    int
		want int // stdout bytes
	}{{"true", 300, 0}, {"echo hello", 300, 6}, {"seq 1 100000", 60, 588895}}
	var report strings.Builder
	for i := 0; i < b.N; i++ {
		report.Reset()
		fmt.Fprintf(&report, "\n%-13s | %-21s | %-21s | %-17s | %-20s | %s\n", "", "tandem over MCP", "tandem engine", "floor", "ratio to floor (p50)", "go-sdk codec alone")
		fmt.Fprintf(&report, "%-13s | %9s %9s | %9s %9s | %8s %8s | %6s %6s %6s | %9s %6s\n", "command", "p50", "p90", "p50", "p90", "p50", "p90", "mcp", "engine", "", "p50", "ratio")
		for _, c := range cases {
			var tl, el, fl, cl latencies
			for j := 0; j < c.n+10; j++ {
				t0 := time.Now()
				got, res := leanExec(b, s, c.cmd)
				t1 := time.Now()
				rec, err := engine.Exec(context.Background(), c.cmd, shell.ExecOptions{})
				t2 := time.Now()
				out, ferr := floorExec(c.cmd)
				t3 := time.Now()
				if err != nil || ferr != nil || len(out) != c.want || got != c.want || rec.Stdout.Size() != int64(c.want) {
					b.Fatalf("%s: floor %d bytes (%v), engine %d (%v), tandem %d", c.cmd, len(out), ferr, rec.Stdout.Size(), err, got)
				}
				if j >= 10 { // warm-up excluded
					tl, el, fl = append(tl, t1.Sub(t0)), append(el, t2.Sub(t1)), append(fl, t3.Sub(t2))
					cl = append(cl, codecTime(b, res))
				}
			}
			f := float64(fl.pct(.5))
			ratio, eratio, cratio := float64(tl.pct(.5))/f, float64(el.pct(.5))/f, float64(cl.pct(.5))/f
			fmt.Fprintf(&report, "%-13s | %7.2fms %7.2fms | %7.2fms %7.2fms | %6.2fms %6.2fms | %5.2fx %5.2fx %6s | %7.2fms %5.2fx\n", c.cmd,
				ms(tl.pct(.5)), ms(tl.pct(.9)), ms(el.pct(.5)), ms(el.pct(.9)), ms(fl.pct(.5)), ms(fl.pct(.9)), ratio, eratio, "", ms(cl.pct(.5)), cratio)
			name := strings.Fields(c.cmd)[0]
			b.ReportMetric(ms(tl.pct(.5)), name+"-p50-ms")
			b.ReportMetric(ratio, name+"-ratio")
		}
	}
	b.Log(report.String())
}

// procKB reads a "Vm..." line of /proc/PID/status, in kB.
func procKB(b *testing.B, pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, field+":")), "%d", &kb)
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkHugeOutputRSS runs `seq 1 3000000` (about 20 MB) through tandem
// over stdio and reports how much the server's peak RSS grew: output is
// spooled to disk, so memory stays bounded by the inline limit. It also
// checks the reply's inline size and the resource's exact bytes.
func BenchmarkHugeOutputRSS(b *testing.B) {
	var want bytes.Buffer
	for i := 1; i <= 3000000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for i := 0; i < b.N; i++ {
		srv := startServer(b, serverOpts{})
		s := sess{srv, "big", str(mustOK(b, srv.call(b, "ssh_connect", map[string]any{"name": "big"}))["sessionToken"])}
		mustOK(b, s.exec(b, "seq 1 1000 >/dev/null; echo warm"))
		pid := srv.cmd.Process.Pid
		before := procKB(b, pid, "VmRSS")
		res := result(b, s.exec(b, "seq 1 3000000"))
		peak := procKB(b, pid, "VmHWM")
		if len(str(res["stdout"])) > 1<<20 {
			b.Fatalf("inline stdout is %d bytes, over the 1 MiB limit", len(str(res["stdout"])))
		}
		if got := readAll(b, srv.cs, res["stdoutResource"].(map[string]any)); !bytes.Equal(got, want.Bytes()) {
			b.Fatalf("resource: %d bytes, want %d", len(got), want.Len())
		}
		growth := float64(peak-before) / 1024
		b.ReportMetric(growth, "MB-peak-RSS-growth")
		b.Logf("seq 1 3000000 (%.1f MB): tandem's peak RSS grew %.1f MB (from %.1f MB)", float64(want.Len())/1e6, growth, float64(before)/1024)
	}
}
