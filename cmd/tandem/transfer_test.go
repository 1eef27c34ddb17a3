package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// transferLimit is the upload and download limit of the transfer tests:
// above the 20 MiB file, so that one more MiB is refused.
const transferLimit = 21 << 20

// transferConfig denies uploads under .git and sets the limits.
const transferConfig = `targets: [{name: local, kind: local, workspace: ws}]
policy:
  mode: allow
  rules:
    - {tool: ssh_upload, path: "**/.git/**", decision: deny}
    - {tool: ssh_download, path: "**/private/*", decision: deny}
limits: {uploadBytes: 22020096, downloadBytes: 22020096}
`

// transferTargets are storyTargets with the transfer config.
func transferTargets() []storyTarget {
	return []storyTarget{
		{"local", func(t *testing.T) (*tandemProc, map[string]any) {
			return startServer(t, serverOpts{config: transferConfig}), map[string]any{"target": "local"}
		}},
		{"ssh", func(t *testing.T) (*tandemProc, map[string]any) {
			d := testenv.SSHD(t)
			return startServer(t, serverOpts{config: transferConfig}), map[string]any{
				"host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile,
			}
		}},
	}
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// callRaw invokes a tool and returns the whole result, its reply checked.
func (s *tandemProc) callRaw(t *testing.T, tool string, args any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return res, mcptest.Check(t, tool, res)
}

// readPages reads a download's resource, every page, as bytes.
func (s *tandemProc) readPages(t *testing.T, res map[string]any) []byte {
	t.Helper()
	uri, pages := str(res["uri"]), int(res["pages"].(float64))
	var all []byte
	for p := range pages {
		rr, err := s.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: fmt.Sprintf("%s?page=%d", uri, p)})
		if err != nil {
			t.Fatalf("read %s page %d: %v", uri, p, err)
		}
		c := rr.Contents[0]
		if c.Blob != nil {
			all = append(all, c.Blob...)
		} else {
			all = append(all, c.Text...)
		}
	}
	return all
}

// TestTransfer: ssh_upload and ssh_download over SSH and in a local
// sandbox: a 20 MiB binary both ways byte for byte, a secret redacted,
// paths out of the workspace, a deny rule and the limit refused with
// nothing written, and malformed arguments answered clearly.
func TestTransfer(t *testing.T) {
	for _, tg := range transferTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "files"
			r := mustOK(t, srv.call(t, "ssh_connect", params))
			sess := map[string]any{"sessionName": "files", "sessionToken": str(r["sessionToken"])}
			with := func(kv ...any) map[string]any {
				m := map[string]any{}
				for k, v := range sess {
					m[k] = v
				}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			}
			exec := func(cmd string) string {
				return str(result(t, mustOK(t, srv.call(t, "ssh_exec", with("command", cmd))))["stdout"])
			}
			// Over SSH the workspace is the login's home (here root's,
			// which outlives the test): everything goes under a
			// directory of the test's own there, removed at the end.
			ws := strings.TrimSpace(exec("pwd -P"))
			d := "tt-" + randomOf(t, alnum, 8)
			exec("mkdir " + d)
			t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(ws, d)) })
			// Outside the workspace: a directory of the test's own, and
			// /etc/passwd (read only; uploads there never overwrite, so a
			// failed check would answer file_exists, not replace it).
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "existing"), []byte("outside"), 0o644); err != nil {
				t.Fatal(err)
			}
			passwd, err := os.ReadFile("/etc/passwd")
			if err != nil {
				t.Fatal(err)
			}

			// 20 MiB of random bytes, up and down, byte for byte.
			blob := make([]byte, 20<<20)
			rand.Read(blob)
			up := mustOK(t, srv.call(t, "ssh_upload", with("path", d+"/out/blob.bin", "content", base64.StdEncoding.EncodeToString(blob), "encoding", "base64")))
			if up["sha256"] != hexSum(blob) || up["bytes"] != float64(len(blob)) || up["path"] != filepath.Join(ws, d, "out/blob.bin") {
				t.Fatalf("upload reply %v, want sha256 %s", mcptest.Short(up), hexSum(blob))
			}
			if got := strings.Fields(exec("sha256sum " + d + "/out/blob.bin"))[0]; got != hexSum(blob) {
				t.Fatalf("the session's sha256sum says %s", got)
			}
			res, down := srv.callRaw(t, "ssh_download", with("path", d+"/out/blob.bin"))
			mustOK(t, down)
			if down["kind"] != "binary" || down["sha256"] != hexSum(blob) || down["resource"] == nil {
				t.Fatalf("download reply %v", mcptest.Short(down))
			}
			if link, ok := res.Content[len(res.Content)-1].(*sdk.ResourceLink); !ok || link.URI != str(down["resource"].(map[string]any)["uri"]) {
				t.Errorf("no resource link beside the reply: %#v", res.Content)
			}
			if got := srv.readPages(t, down["resource"].(map[string]any)); !bytes.Equal(got, blob) {
				t.Fatalf("downloaded %d bytes, sha256 %s; want the upload's %s", len(got), hexSum(got), hexSum(blob))
			}

			// Text comes back bounded and redacted.
			token := "ghp_" + randomOf(t, alnum, 36)
			exec(fmt.Sprintf("printf 'line one\\nGITHUB_TOKEN=%s\\nline three\\n' > %s/notes.txt", token, d))
			txt := mustOK(t, srv.call(t, "ssh_download", with("path", d+"/notes.txt")))
			if data := str(txt["data"]); strings.Contains(data, token) || !strings.Contains(data, "line three") || txt["eof"] != true || txt["redacted"] == nil {
				t.Errorf("text download not redacted: %v", mcptest.Short(txt))
			}
			part := mustOK(t, srv.call(t, "ssh_download", with("path", d+"/notes.txt", "maxBytes", 12)))
			if part["data"] != "line one\n" || part["nextOffset"] != float64(9) {
				t.Errorf("bounded download: %v", mcptest.Short(part))
			}
			exec("(cd " + d + " && mkdir -p private && echo hidden > private/x)")

			// Refusals: nothing is read or written anywhere.
			exec("(cd " + d + " && ln -s /etc out/etc && ln -s " + outside + " up)")
			for _, tc := range []struct {
				tool, path, code string
			}{
				{"ssh_upload", "../../etc/passwd", "path_outside_workspace"},
				{"ssh_download", "../../etc/passwd", "path_outside_workspace"},
				{"ssh_download", "/etc/passwd", "path_outside_workspace"},
				{"ssh_upload", d + "/out/etc/passwd", "path_outside_workspace"},
				{"ssh_download", d + "/out/etc/passwd", "path_outside_workspace"},
				{"ssh_upload", d + "/up/existing", "path_outside_workspace"},
				{"ssh_upload", d + "/up/new", "path_outside_workspace"},
				{"ssh_download", d + "/up/existing", "path_outside_workspace"},
				{"ssh_upload", outside + "/new", "path_outside_workspace"},
				{"ssh_upload", d + "/.git/config", "policy_denied"},
				{"ssh_upload", d + "/out/../.git/hooks/pre-commit", "policy_denied"},
				{"ssh_download", d + "/private/x", "policy_denied"},
				{"ssh_download", d + "/missing.txt", "file_not_found"},
				{"ssh_download", d + "/out", "not_a_file"},
				{"ssh_upload", d + "/out/blob.bin", "file_exists"},
			} {
				args := with("path", tc.path)
				if tc.tool == "ssh_upload" {
					args["content"] = "must not land"
				}
				e := wantError(t, srv.call(t, tc.tool, args), tc.code)
				if tc.code == "path_outside_workspace" && !strings.Contains(str(e["message"]), "outside the workspace") {
					t.Errorf("%s %s: the refusal names no rule: %v", tc.tool, tc.path, e["message"])
				}
				if tc.code == "policy_denied" && !strings.Contains(str(e["rule"]), "path:") {
					t.Errorf("%s %s: the refusal names no rule: %v", tc.tool, tc.path, mcptest.Short(e))
				}
			}
			// Over the limit: refused, no file.
			big := base64.StdEncoding.EncodeToString(make([]byte, transferLimit+(512<<10)))
			e := wantError(t, srv.call(t, "ssh_upload", with("path", d+"/big.bin", "content", big, "encoding", "base64")), "file_too_large")
			if !strings.Contains(str(e["message"]), "limits.uploadBytes") {
				t.Errorf("the limit's refusal names no setting: %v", e["message"])
			}
			// Malformed arguments.
			for _, tc := range []struct {
				tool  string
				args  map[string]any
				field string
			}{
				{"ssh_upload", with("path", d+"/x.bin", "content", "not base64!", "encoding", "base64"), "content"},
				{"ssh_upload", with("path", d+"/x.bin", "content", "x", "encoding", "hex"), "encoding"},
				{"ssh_upload", with("path", d+"/x.bin", "content", "x", "mode", "rwx"), "mode"},
				{"ssh_upload", with("path", d+"/x.bin", "content", "x", "mode", "4755"), "mode"},
				{"ssh_upload", with("path", d+"/x.bin"), "content"},
				{"ssh_upload", with("path", "", "content", "x"), "path"},
				{"ssh_download", with("path", d+"/notes.txt", "offset", -1), "offset"},
				{"ssh_download", with("path", d+"/notes.txt", "maxBytes", 0), "maxBytes"},
			} {
				e := wantError(t, srv.call(t, tc.tool, tc.args), "invalid_arguments")
				if e["field"] != tc.field {
					t.Errorf("%s %v: field %v, want %s (%v)", tc.tool, tc.args["path"], e["field"], tc.field, e["message"])
				}
			}
			exec("(cd " + d + " && rm -rf out/etc up notes.txt private)")
			if now, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(now, passwd) {
				t.Errorf("/etc/passwd changed")
			}
			if names, _ := os.ReadDir(outside); len(names) != 1 {
				t.Errorf("a refused upload wrote outside the workspace: %v", names)
			}
			if ls := exec("(cd " + d + " && ls -A . out)"); ls != ".:\nout\n\nout:\nblob.bin\n" {
				t.Errorf("the workspace holds %q: a refused upload left a file", ls)
			}
			mustOK(t, srv.call(t, "ssh_disconnect", sess))

			// The audit has each transfer's path, size and hash, never its content.
			var uploads, downloads int
			probe := base64.StdEncoding.EncodeToString(blob[:48])
			for _, rec := range auditRecords(t, srv.dataDir) {
				args := string(rec.Args)
				if rec.Tool != "ssh_upload" && rec.Tool != "ssh_download" {
					continue
				}
				if strings.Contains(args, probe) || strings.Contains(args, "must not land") || strings.Contains(args, token) {
					t.Errorf("the audit keeps content: %s %s", rec.Tool, lastN(args, 300))
				}
				if rec.Outcome != "ok" || !strings.Contains(args, hexSum(blob)) {
					continue
				}
				switch {
				case rec.Tool == "ssh_upload" && rec.Bytes == int64(len(blob)) && strings.Contains(args, d+"/out/blob.bin"):
					uploads++
				case rec.Tool == "ssh_download" && rec.Bytes == int64(len(blob)):
					downloads++
				}
			}
			if uploads != 1 || downloads != 1 {
				t.Errorf("audit: %d upload and %d download records with path, size and sha256, want 1 each", uploads, downloads)
			}
		})
	}
}

// TestDownloadImageTS: a PNG made in the session by Python comes back
// from ssh_download as an image block that the TypeScript SDK decodes to
// the same bytes.
func TestDownloadImageTS(t *testing.T) {
	c := startTSClient(t, "serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workspace", t.TempDir())
	tok, err := c.do(map[string]any{"op": "connect", "name": "img"})
	if err != nil {
		t.Fatal(err)
	}
	sess := map[string]any{"sessionName": "img", "sessionToken": tok.Token}
	const png = `python3 - <<'EOF'
import struct, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
w, h = 64, 48
rows = b''.join(b'\x00' + b''.join(bytes(((x * 4) % 256, (y * 5) % 256, 128)) for x in range(w)) for y in range(h))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(rows)) + chunk(b'IEND', b'')
open('chart.png', 'wb').write(png)
EOF
sha256sum chart.png`
	args := map[string]any{"command": png}
	for k, v := range sess {
		args[k] = v
	}
	ex, err := c.do(map[string]any{"op": "call", "tool": "ssh_exec", "args": args})
	if err != nil {
		t.Fatal(err)
	}
	made := strings.Fields(str(ex.Reply["result"].(map[string]any)["stdout"]))
	if len(made) == 0 {
		t.Fatalf("python wrote no PNG: %v", ex.Reply)
	}
	args = map[string]any{"path": "chart.png"}
	for k, v := range sess {
		args[k] = v
	}
	img, err := c.do(map[string]any{"op": "image", "args": args})
	if err != nil {
		t.Fatal(err)
	}
	if img.SHA256 != made[0] || img.Reply["sha256"] != made[0] || img.Reply["mimeType"] != "image/png" || img.Bytes == 0 {
		t.Fatalf("image block decoded to %d bytes, sha256 %s; reply %v; want %s", img.Bytes, img.SHA256, img.Reply, made[0])
	}
}

// TestTransferGate: the file tools pass the user-activity gate like
// ssh_exec: after the human ran a command, the agent's next upload is
// refused once with what the human ran, and the one after goes through.
func TestTransferGate(t *testing.T) {
	s := localSession(t, serverOpts{})
	args := map[string]any{"sessionName": s.name, "sessionToken": s.tok, "path": "after-human.txt", "content": "x", "overwrite": true}
	mustOK(t, s.srv.call(t, "ssh_upload", args))
	url := str(mustOK(t, s.srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	typeOverWebSocket(t, url, dataDirToken(t, s.srv.dataDir), "echo from-human\r", "\rfrom-human\r\n")
	var gated map[string]any
	for deadline := time.Now().Add(10 * time.Second); gated == nil; {
		r := s.srv.call(t, "ssh_upload", args)
		switch {
		case r["error"] == "user_activity_detected":
			gated = r
		case r["success"] != true || time.Now().After(deadline):
			t.Fatalf("upload after the human's command: %v", mcptest.Short(r))
		}
	}
	if cmds := gated["userCommands"].([]any); len(cmds) != 1 || str(cmds[0].(map[string]any)["command"]) != "echo from-human" {
		t.Errorf("the gate's reply: %v", mcptest.Short(gated))
	}
	mustOK(t, s.srv.call(t, "ssh_download", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "path": "after-human.txt"}))
}

// TestTransferServerRestarts: when a local session's file server dies (it
// is a process of its own), the next transfer starts a new one.
func TestTransferServerRestarts(t *testing.T) {
	s := localSession(t, serverOpts{})
	args := map[string]any{"sessionName": s.name, "sessionToken": s.tok, "path": "kept.txt", "content": "kept", "overwrite": true}
	mustOK(t, s.srv.call(t, "ssh_upload", args))
	servers := fileServers(t, s.srv.cmd.Process.Pid)
	if len(servers) != 1 {
		t.Fatalf("file servers of tandem: %v, want one", servers)
	}
	p, err := os.FindProcess(servers[0])
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Kill()
	for deadline := time.Now().Add(10 * time.Second); testenv.Running(servers[0]); {
		if time.Now().After(deadline) {
			t.Fatalf("file server %d still running", servers[0])
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := mustOK(t, s.srv.call(t, "ssh_download", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "path": "kept.txt"}))
	if got["data"] != "kept" {
		t.Errorf("download after the server died: %v", mcptest.Short(got))
	}
	if now := fileServers(t, s.srv.cmd.Process.Pid); len(now) != 1 || now[0] == servers[0] {
		t.Errorf("file servers after: %v (before %v)", now, servers)
	}
}

// fileServers lists the pids of the sandbox file servers tandem (pid)
// started.
func fileServers(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscanf(e.Name(), "%d", &child); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		cmdline, err2 := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || err2 != nil || !bytes.Contains(cmdline, []byte("\x00--serve-files\x00")) {
			continue
		}
		// The fields after the command's name: state, then ppid.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == fmt.Sprint(pid) {
			out = append(out, child)
		}
	}
	return out
}

// TestTransferHTTP: over Streamable HTTP an upload bigger than the SDK's
// default 4 MiB request body goes through (the limit follows
// limits.uploadBytes), and one past that message size is refused.
func TestTransferHTTP(t *testing.T) {
	ws := t.TempDir()
	s := startHTTP(t, httpOpts{config: fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: %s}\nlimits: {uploadBytes: 8388608}\n", ws)})
	c := s.client(t, s.token(t, "--tenant", "default", "--actor", "agent"))
	tok := str(mustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "h"}))["sessionToken"])
	blob := make([]byte, 6<<20)
	rand.Read(blob)
	up := mustOK(t, c.Call(t, "ssh_upload", map[string]any{"sessionName": "h", "sessionToken": tok, "path": "six.bin",
		"content": base64.StdEncoding.EncodeToString(blob), "encoding": "base64"}))
	if up["sha256"] != hexSum(blob) {
		t.Fatalf("upload over HTTP: %v", mcptest.Short(up))
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "six.bin")); !bytes.Equal(got, blob) {
		t.Fatal("the uploaded file differs")
	}
	// A request past what the limit needs is refused before it is read whole.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.CS.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_upload", Arguments: map[string]any{"sessionName": "h", "sessionToken": tok,
		"path": "big.bin", "content": base64.StdEncoding.EncodeToString(make([]byte, 10<<20)), "encoding": "base64"}})
	if err == nil {
		t.Fatal("an upload past the message limit went through")
	}
	if _, err := os.Stat(filepath.Join(ws, "big.bin")); err == nil {
		t.Error("the refused upload wrote big.bin")
	}
}

// TestTransferNoSFTP: an SSH server whose sftp subsystem does not start
// answers transfer_unavailable, saying to use ssh_exec, and the session
// goes on.
func TestTransferNoSFTP(t *testing.T) {
	d := testenv.SSHDConfig(t, "Subsystem sftp /bin/false")
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "nosftp", "host": d.Host, "port": d.Port, "username": d.User, "keyFilePath": d.ClientKeyFile}))["sessionToken"])
	sess := map[string]any{"sessionName": "nosftp", "sessionToken": tok}
	e := wantError(t, srv.call(t, "ssh_download", xferArgs(sess, "path", "x.txt")), "transfer_unavailable")
	if !strings.Contains(str(e["message"]), "ssh_exec") {
		t.Errorf("the refusal says nothing of what to do: %v", e["message"])
	}
	if out := str(result(t, mustOK(t, srv.call(t, "ssh_exec", xferArgs(sess, "command", "echo still-here"))))["stdout"]); out != "still-here\n" {
		t.Errorf("the session after the refusal: %q", out)
	}
}

// TestTransferTS: a 20 MiB binary file goes up with ssh_upload and comes
// back through ssh_download's resource pages in the TypeScript SDK, byte
// for byte. The SDK's stdio transport drops the connection on a message
// over 10 MiB (its ReadBuffer's default), so a page, base64 in JSON, must
// stay under that.
func TestTransferTS(t *testing.T) {
	ws := t.TempDir()
	c := startTSClient(t, "serve", "--web", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workspace", ws)
	tok, err := c.do(map[string]any{"op": "connect", "name": "big"})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 20<<20)
	_, _ = rand.Read(data)
	src := filepath.Join(t.TempDir(), "blob.bin")
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	sess := map[string]any{"sessionName": "big", "sessionToken": tok.Token}
	up, err := c.do(map[string]any{"op": "upload", "file": src, "args": xferArgs(sess, "path", "out/blob.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if up.Reply["sha256"] != want {
		t.Fatalf("upload reply %v, want sha256 %s", up.Reply, want)
	}
	down, err := c.do(map[string]any{"op": "download", "args": xferArgs(sess, "path", "out/blob.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if down.SHA256 != want || down.Bytes != len(data) || down.Reply["sha256"] != want {
		t.Fatalf("downloaded %d bytes, sha256 %s (reply %v); want %d, %s", down.Bytes, down.SHA256, down.Reply["sha256"], len(data), want)
	}
}

// TestDownloadPagesChanged: tandem reads a download's next page while the
// client takes in one; a page read ahead is still refused (file_changed)
// when the file changed after its download named it, and the pages of an
// unchanged file come back whole, over SSH and locally.
func TestDownloadPagesChanged(t *testing.T) {
	for _, tg := range transferTargets() {
		t.Run(tg.name, func(t *testing.T) {
			srv, params := tg.connect(t)
			params["name"] = "pages"
			r := mustOK(t, srv.call(t, "ssh_connect", params))
			sess := map[string]any{"sessionName": "pages", "sessionToken": str(r["sessionToken"])}
			ws := xferTrimNL(str(result(t, mustOK(t, srv.call(t, "ssh_exec", xferArgs(sess, "command", "pwd -P"))))["stdout"]))
			d := "tp-" + randomOf(t, alnum, 8)
			if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(ws, d)) })
			blob := make([]byte, 3<<20+17)
			_, _ = rand.Read(blob)
			file := filepath.Join(ws, d, "blob.bin")
			if err := os.WriteFile(file, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			down := mustOK(t, srv.call(t, "ssh_download", xferArgs(sess, "path", d+"/blob.bin")))
			res := down["resource"].(map[string]any)
			if got := srv.readPages(t, res); !bytes.Equal(got, blob) {
				t.Fatalf("pages read back %d bytes, not the file's %d", len(got), len(blob))
			}
			// Page 0 again: page 1 is read ahead. Then the file changes
			// (same size, another time) before page 1 is asked for.
			uri := str(res["uri"])
			if _, err := srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=0"}); err != nil {
				t.Fatal(err)
			}
			changed := bytes.Repeat([]byte{'x'}, len(blob))
			if err := os.WriteFile(file, changed, 0o644); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(file, later, later); err != nil {
				t.Fatal(err)
			}
			_, err := srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=1"})
			if err == nil || !strings.Contains(err.Error(), "file_changed") {
				t.Fatalf("page 1 after the file changed: %v, want file_changed", err)
			}
		})
	}
}
