package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

type sess struct {
	srv       *tandemProc
	name, tok string
}

func (s sess) exec(t testing.TB, cmd string, timeout ...float64) map[string]any {
	t.Helper()
	args := map[string]any{"sessionName": s.name, "sessionToken": s.tok, "command": cmd}
	if len(timeout) > 0 {
		args["timeoutSeconds"] = timeout[0]
	}
	return s.srv.call(t, "ssh_exec", args)
}

func localSession(t *testing.T, o serverOpts) sess {
	t.Helper()
	srv := startServer(t, o)
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "s"}))["sessionToken"])
	return sess{srv, "s", tok}
}

// readAll reads every page of an output resource.
func readAll(t testing.TB, cs *sdk.ClientSession, res map[string]any) []byte {
	t.Helper()
	uri, pages := str(res["uri"]), int(res["pages"].(float64))
	var out bytes.Buffer
	for i := 0; i < pages; i++ {
		r, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=" + strconv.Itoa(i)})
		if err != nil {
			t.Fatalf("read %s page %d: %v", uri, i, err)
		}
		c := r.Contents[0]
		if c.Blob != nil {
			out.Write(c.Blob)
		} else {
			out.WriteString(c.Text)
		}
	}
	return out.Bytes()
}

func TestHugeOutputComplete(t *testing.T) {
	var want bytes.Buffer
	for i := 1; i <= 2000000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "big"
			s := sess{srv, "big", str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])}
			res := result(t, s.exec(t, "seq 1 2000000"))
			inline := str(res["stdout"])
			if len(inline) > 1<<20 || res["stdoutTruncated"] != true || !strings.HasPrefix(want.String(), inline) {
				t.Fatalf("inline head: %d bytes, truncated=%v", len(inline), res["stdoutTruncated"])
			}
			sr := res["stdoutResource"].(map[string]any)
			if int(sr["bytes"].(float64)) != want.Len() {
				t.Errorf("resource size %v, want %d", sr["bytes"], want.Len())
			}
			if got := readAll(t, s.srv.cs, sr); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("resource differs: %d bytes, want %d", len(got), want.Len())
			}
		})
	}
}

// TestDiskFullDuringOutput: when the disk fills while a command's output is
// spooled, the agent is told how much is missing, keeps what was captured,
// and the session, the audit log and the next command carry on.
func TestDiskFullDuringOutput(t *testing.T) {
	var want bytes.Buffer
	for i := 1; i <= 1000000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	s := localSession(t, serverOpts{fileSizeKB: 2048, config: "targets:\n  - {name: local, kind: local, workspace: ws}\nlimits:\n  inlineOutputBytes: 4096\n"})
	res := result(t, s.exec(t, "seq 1 1000000"))
	sr, _ := res["stdoutResource"].(map[string]any)
	if res["exitCode"] != 0.0 || res["stdoutTruncated"] != true || sr == nil {
		t.Fatalf("reply: %v", mcptest.Short(res))
	}
	kept := int(sr["bytes"].(float64))
	msg := str(res["stdoutError"])
	lost := want.Len() - kept
	if kept <= 4096 || kept > 2048<<10 || !strings.Contains(msg, fmt.Sprintf("%d bytes of stdout after the first %d were lost", lost, kept)) || !strings.Contains(msg, "Free space") {
		t.Fatalf("kept %d of %d bytes; stdoutError %q", kept, want.Len(), msg)
	}
	if got := readAll(t, s.srv.cs, sr); !bytes.Equal(got, want.Bytes()[:kept]) {
		t.Errorf("the kept output is not the start of the real output (%d bytes)", len(got))
	}
	if r := result(t, s.exec(t, "echo still-here")); r["stdout"] != "still-here\n" || r["stdoutError"] != nil {
		t.Errorf("the next command: %v", r)
	}
	if out, err := tandemCLI(t, "audit", "verify", "--data-dir", s.srv.dataDir); err != nil {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
}

func TestForgedMarksCannotFakeExit(t *testing.T) {
	s := localSession(t, serverOpts{})
	forge := `printf '\033]133;D;0\007\033]133;D;0;n=00000000000000000000000000000000\007\033]633;P;Cwd=/forged\007'; ` +
		`printf '\033]133;D;0\007' >&2; printf '\033]633;X;eom;n=deadbeef\007'; exit 7`
	res := result(t, s.exec(t, "bash -c "+strconv.Quote(forge)))
	if res["exitCode"] != 7.0 || res["cwd"] == "/forged" {
		t.Errorf("forged marks changed the record: %v", res)
	}
	if !strings.Contains(str(res["stdout"]), "133;D;0") {
		t.Errorf("the program's own bytes must reach the agent unchanged: %q", res["stdout"])
	}
}

func TestSSHDKilledMidCommand(t *testing.T) {
	d := testenv.SSHD(t)
	srv := startServer(t, serverOpts{config: "limits:\n  keepaliveInterval: 500ms\n"})
	r := mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "k", "host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile}))
	s := sess{srv, "k", str(r["sessionToken"])}
	mustOK(t, s.exec(t, "echo up"))
	go func() {
		time.Sleep(700 * time.Millisecond)
		d.Kill()
	}()
	start := time.Now()
	e := wantError(t, s.exec(t, "sleep 60", 50), "connection_lost")
	// 500ms interval x (3 unanswered + 1) is the keepalive window.
	if took := time.Since(start); took > 700*time.Millisecond+2*time.Second+time.Second {
		t.Errorf("connection_lost after %v, past the keepalive window", took)
	}
	if !strings.Contains(str(e["message"]), "ssh_connect") {
		t.Errorf("message should say what to do: %v", e["message"])
	}
	ended := wantError(t, s.exec(t, "true"), "session_ended")
	if ended["reason"] != "connection_lost" {
		t.Errorf("later call: %v", ended)
	}
}

func TestLocalSandboxDenies(t *testing.T) {
	probe, err := os.MkdirTemp("/", "tandem-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(probe) })
	if err := os.WriteFile(filepath.Join(probe, "secret"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	ws := t.TempDir()
	s := localSession(t, serverOpts{dir: ws})
	tests := []struct{ cmd, want string }{
		{"cat " + probe + "/secret", "Permission denied"},
		{"cat /root/.ssh/* /root/.bashrc", "Permission denied"},
		{"ls /root", "Permission denied"},
		{"touch /etc/tandem-x", "Permission denied"},
		{"touch /tmp/tandem-x", "Permission denied"},
		{"echo hi > /dev/tcp/127.0.0.1/" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "Permission denied"},
	}
	for _, tc := range tests {
		res := result(t, s.exec(t, tc.cmd))
		if res["exitCode"] == 0.0 || !strings.Contains(str(res["stderr"]), tc.want) || strings.Contains(str(res["stdout"]), "s3cret") {
			t.Errorf("%q was not denied: %v", tc.cmd, res)
		}
	}
	select {
	case <-accepted:
		t.Error("the sandboxed shell reached a TCP listener with the network off")
	default:
	}
	if res := result(t, s.exec(t, "echo data > inside && cat inside && pwd")); res["stdout"] != "data\n"+ws+"\n" {
		t.Errorf("workspace not writable: %v", res)
	}
}

// TestCommandsKeepNoDescriptors: every command's output is spooled to a
// file and kept, but no descriptor stays open once it is: a long-lived
// server must not run out of descriptors after some thousands of
// commands. (Each journaled small output once leaked one.) Outputs of
// three sizes: in memory until the journal writes them, one whose file
// is created ahead of a spill that never comes, and one that spills.
func TestCommandsKeepNoDescriptors(t *testing.T) {
	s := localSession(t, serverOpts{})
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.srv.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	cmds := []struct {
		cmd   string
		bytes int
	}{{"echo hi", 3}, {"seq 1 9000", 43893}, {"seq 1 20000", 108894}}
	for _, c := range cmds { // warm up: the spool dir, the journal
		s.exec(t, c.cmd)
	}
	before := fds()
	const rounds = 20
	for range rounds {
		for _, c := range cmds {
			res := result(t, mustOK(t, s.exec(t, c.cmd)))
			got := len(str(res["stdout"]))
			if n, ok := res["stdoutBytes"].(float64); ok {
				got = int(n) // a bounded reply: the stream's size
			}
			if got != c.bytes {
				t.Fatalf("%s: %d bytes of stdout, want %d", c.cmd, got, c.bytes)
			}
		}
	}
	// The journal writes each command's output after the reply: wait for
	// it to catch up, as the count comes back down.
	deadline := time.Now().Add(10 * time.Second)
	for fds() > before+5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if after := fds(); after > before+5 {
		t.Fatalf("the server held %d descriptors before %d commands and %d after: spooled outputs keep files open", before, rounds*len(cmds), after)
	}
}
