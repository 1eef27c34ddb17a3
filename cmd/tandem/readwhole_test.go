package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// TestPastedCommandReadWhole: a human pastes a block of 300 lines (11 KiB)
// at the prompt, as the page does in bracketed-paste mode: one command.
// The gate's report cuts its line to fit, says so, and ssh_read_output
// with stream "command" reads the whole line back byte for byte; locally
// and over SSH (issue 29: lines 112-300 could not be read).
func TestPastedCommandReadWhole(t *testing.T) {
	for _, tg := range storyTargets() {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			srv, params := tg.connect(t)
			params["name"] = "whole"
			tok := str(mustOK(t, srv.call(t, "ssh_connect", params))["sessionToken"])
			args := func(m map[string]any) map[string]any {
				m["sessionName"], m["sessionToken"] = "whole", tok
				return m
			}
			exec := func(cmd string) map[string]any { return srv.call(t, "ssh_exec", args(map[string]any{"command": cmd})) }
			read := func(id string, off int) map[string]any {
				return mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": id, "offset": off})))
			}
			url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
			v := openViewer(t, url, dataDirToken(t, srv.dataDir))
			mustOK(t, exec("true")) // the prompt is drawn: bash reads the paste as one buffer

			lines := make([]string, 300)
			for i := range lines {
				lines[i] = fmt.Sprintf("echo pasted-line-%03d-%s", i, strings.Repeat("x", 16))
			}
			want := strings.Join(lines, "\n")
			if len(want) < 11<<10 || len(want) > 12<<10 {
				t.Fatalf("the paste is %d bytes, want about 11 KiB", len(want))
			}
			// As xterm.js sends a paste in bracketed-paste mode, then Enter.
			v.paste(t, "\x1b[200~"+strings.Join(lines, "\r")+"\x1b[201~\r")
			v.waitFor(t, "pasted-line-299-", 2) // echoed, then printed

			got := humanReport(t, exec, read, 1, 32<<10)
			c := got[0]
			if c["commandTruncated"] != true || c["commandBytes"] != float64(len(want)) || !strings.HasPrefix(want, str(c["command"])) {
				t.Fatalf("the report's entry: truncated %v, %v bytes, command %.80q…", c["commandTruncated"], c["commandBytes"], c["command"])
			}
			var text strings.Builder
			for off := 0; ; {
				r := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": c["commandId"], "stream": "command", "offset": off, "maxBytes": 4096})))
				text.WriteString(str(r["data"]))
				if r["eof"] == true {
					break
				}
				off = int(r["nextOffset"].(float64))
			}
			if text.String() != want {
				t.Fatalf("the command read back is %d bytes, want %d; it starts %.100q", text.Len(), len(want), text.String())
			}
			out := mcpReadAll(t, read, str(c["commandId"]))
			for _, i := range []int{0, 150, 299} {
				if !strings.Contains(out, fmt.Sprintf("pasted-line-%03d-", i)) {
					t.Errorf("its output lacks line %d", i)
				}
			}
		})
	}
}

// TestLongPasteOutputsReadable: a human pastes 2,000 lines while the
// agent's command runs; the gate lists each as a command, and the output
// of the first, the middle and the last reads back by its commandId
// (issue 29: the oldest were "unknown_command", as a session kept its
// latest 1,000 commands).
func TestLongPasteOutputsReadable(t *testing.T) {
	srv := startServer(t, serverOpts{})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "long"}))["sessionToken"])
	args := func(m map[string]any) map[string]any {
		m["sessionName"], m["sessionToken"] = "long", tok
		return m
	}
	exec := func(cmd string) map[string]any { return srv.call(t, "ssh_exec", args(map[string]any{"command": cmd})) }
	read := func(id string, off int) map[string]any {
		return mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": id, "offset": off})))
	}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", args(map[string]any{})))["monitoringUrl"])
	v := openViewer(t, url, dataDirToken(t, srv.dataDir))

	const n = 2000
	var paste strings.Builder
	for i := range n {
		fmt.Fprintf(&paste, "echo out-%04d\r", i)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); mustOK(t, exec("sleep 1; echo agent-done")) }()
	v.waitFor(t, "sleep 1; echo agent-done", 1)
	v.paste(t, paste.String())
	wg.Wait()
	got := humanReport(t, exec, read, n, 32<<10)
	if len(got) != n {
		t.Fatalf("%d commands reported, want %d", len(got), n)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if got[i]["command"] != fmt.Sprintf("echo out-%04d", i) {
			t.Fatalf("command %d is %v", i, got[i])
		}
		// The echo of lines typed ahead may show around the output (the
		// terminal echoes keys when they arrive): the line is there.
		out := mcpReadAll(t, read, str(got[i]["commandId"]))
		if !strings.Contains(out, fmt.Sprintf("out-%04d\n", i)) {
			t.Errorf("command %d's output reads back as %q", i, out)
		}
	}
}

// TestKeptOutputBound: a program that prints without end, and commands
// whose outputs pass limits.keptOutputBytes, keep the session's spool
// within the bound: one stream stops at half of it (the reply says so),
// the oldest outputs are removed, and reading one says why and what to
// do (output_removed), while the latest still read back. The recording
// stops at limits.recordingBytes.
func TestKeptOutputBound(t *testing.T) {
	const limit = 4 << 20
	s := localSession(t, serverOpts{config: fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: ws}\nlimits:\n  keptOutputBytes: %d\n  recordingBytes: %d\n", limit, limit/2)})
	flood := mustOK(t, s.exec(t, "head -c 40000000 /dev/zero | tr '\\0' y"))
	res := flood["result"].(map[string]any)
	if res["stdoutBytes"] != float64(limit/2) || !strings.Contains(str(res["stdoutError"]), "not kept") {
		t.Fatalf("the flood's result: %v bytes, error %q", res["stdoutBytes"], res["stdoutError"])
	}
	var ids []string
	for i := range 4 {
		r := mustOK(t, s.exec(t, fmt.Sprintf("head -c 1500000 /dev/zero | tr '\\0' %c", 'a'+i)))
		ids = append(ids, str(r["commandId"]))
	}
	spool := filepath.Join(s.srv.dataDir, "spool")
	var total int64
	_ = filepath.Walk(spool, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			total += fi.Size()
		}
		return nil
	})
	if total > limit+64<<10 {
		t.Errorf("the spool holds %d bytes, over the bound of %d", total, limit)
	}
	read := func(id string) map[string]any {
		return s.srv.call(t, "ssh_read_output", map[string]any{"sessionName": s.name, "sessionToken": s.tok, "commandId": id, "offset": -10})
	}
	gone := wantError(t, read(str(flood["commandId"])), "output_removed")
	if m := str(gone["message"]); !strings.Contains(m, "limits.keptOutputBytes") || !strings.Contains(m, "soon after") {
		t.Errorf("the removed output's message: %q", m)
	}
	if last := mustOK(t, read(ids[3])); last["data"] != "dddddddddd" {
		t.Errorf("the latest output reads back as %v", last)
	}
	uri := str(res["stdoutResource"].(map[string]any)["uri"])
	if _, err := s.srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=0"}); err == nil || !strings.Contains(err.Error(), "limits.keptOutputBytes") {
		t.Errorf("reading the removed output's resource: %v", err)
	}

	// The history the store keeps agrees: the removed output's row keeps
	// its size and names no file; the latest names its file.
	mustOK(t, s.srv.call(t, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))
	_ = s.srv.cs.Close()
	st, err := sqlite.Open(context.Background(), s.srv.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var sid string
	for _, r := range auditRecords(t, s.srv.dataDir) {
		if r.Event == "session_start" {
			sid = r.SessionID
		}
	}
	rows, err := st.Commands(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]store.CommandRow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	if r := byID[str(flood["commandId"])]; r.StdoutBytes != limit/2 || r.StdoutPath != "" {
		t.Errorf("the flood's row: %d bytes at %q", r.StdoutBytes, r.StdoutPath)
	}
	// The recording holds the flood up to its own bound, and says so.
	cast, err := os.ReadFile(filepath.Join(s.srv.dataDir, "recordings", sid+".cast"))
	if err != nil || len(cast) > limit/2+64<<10 || !strings.Contains(string(cast), "limits.recordingBytes") {
		t.Errorf("the recording: %d bytes (bound %d), %v", len(cast), limit/2, err)
	}
	if r := byID[ids[3]]; r.StdoutPath == "" {
		t.Errorf("the latest row names no file: %+v", r)
	} else if fi, err := os.Stat(r.StdoutPath); err != nil || fi.Size() != 1500000 {
		t.Errorf("the latest output's file: %v %v", fi, err)
	}
}
