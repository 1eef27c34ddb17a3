package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/session"
)

func seqBytes(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

func readOutput(t testing.TB, c *mcptest.Client, s mcptest.Session, args map[string]any) map[string]any {
	t.Helper()
	a := map[string]any{"sessionName": s.Name, "sessionToken": s.Token}
	for k, v := range args {
		a[k] = v
	}
	return c.Call(t, "ssh_read_output", a)
}

// readBack reads a whole stream with ssh_read_output, 1 MiB at a time.
func readBack(t testing.TB, c *mcptest.Client, s mcptest.Session, id, stream string) []byte {
	t.Helper()
	var out []byte
	for {
		r := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": id, "stream": stream, "offset": len(out), "maxBytes": 1 << 20}))
		data := []byte(mcptest.Str(r["data"]))
		if r["encoding"] == "base64" {
			var err error
			if data, err = base64.StdEncoding.DecodeString(string(data)); err != nil {
				t.Fatal(err)
			}
		}
		if int(r["offset"].(float64)) != len(out) || int(r["bytes"].(float64)) != len(data) {
			t.Fatalf("read at %d: %s", len(out), mcptest.Short(r))
		}
		out = append(out, data...)
		if r["eof"] == true {
			return out
		}
		if len(data) == 0 {
			t.Fatalf("no progress and no eof at %d: %s", len(out), mcptest.Short(r))
		}
	}
}

// readResource reads every page of an output resource.
func readResource(t testing.TB, c *mcptest.Client, res map[string]any) []byte {
	t.Helper()
	var out []byte
	for p := 0; p < int(res["pages"].(float64)); p++ {
		r, err := c.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: fmt.Sprintf("%s?page=%d", res["uri"], p)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Contents[0].Text...)
	}
	return out
}

// TestHugeOutputBounded is the acceptance point: seq 1 3000000 (21
// MB) comes back in at most 64 KiB of JSON with an exact head and tail,
// and reads back byte for byte through ssh_read_output and the resource.
func TestHugeOutputBounded(t *testing.T) {
	f := newServer(t, 0) // the default budget, 32 KiB
	c := f.client(t)
	s := connect(t, c, "huge")
	want := seqBytes(3000000)
	res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: "ssh_exec",
		Arguments: map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "seq 1 3000000"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Content[0].(*sdk.TextContent).Text); n > 64<<10 {
		t.Fatalf("the reply is %d bytes of JSON, over 64 KiB", n)
	}
	top := mcptest.Check(t, "ssh_exec", res)
	r := mcptest.Result(t, top)
	head, tail := []byte(mcptest.Str(r["stdout"])), []byte(mcptest.Str(r["stdoutTail"]))
	if !bytes.HasPrefix(want, head) || !bytes.HasSuffix(want, tail) || len(tail) < len(head) || len(head) < 8<<10 {
		t.Fatalf("head %d bytes, tail %d: not the exact ends", len(head), len(tail))
	}
	if r["stdoutBytes"] != float64(len(want)) || r["stdoutTruncated"] != true {
		t.Fatalf("stdoutBytes %v, want %d", r["stdoutBytes"], len(want))
	}
	id := mcptest.Str(top["commandId"])
	if got := readBack(t, c, s, id, "stdout"); !bytes.Equal(got, want) {
		t.Fatalf("ssh_read_output: %d bytes, want %d", len(got), len(want))
	}
	if got := readResource(t, c, r["stdoutResource"].(map[string]any)); !bytes.Equal(got, want) {
		t.Fatalf("resource: %d bytes, want %d", len(got), len(want))
	}
}

func TestReadOutput(t *testing.T) {
	f := newServer(t, 0)
	c, other := f.client(t), f.client(t)
	s := connect(t, c, "reader")
	so := connect(t, other, "other")
	top := mcptest.MustOK(t, exec(t, c, s, "seq 1 100000; echo oops >&2"))
	id := mcptest.Str(top["commandId"])
	want := seqBytes(100000)
	latin := mcptest.Str(mcptest.MustOK(t, exec(t, c, s, `printf 'ok\377\n'`))["commandId"])
	bin := mcptest.Str(mcptest.MustOK(t, exec(t, c, s, `printf 'a\000b'`))["commandId"])
	lines := func(r map[string]any) (got []string) {
		for _, m := range r["matches"].([]any) {
			e := m.(map[string]any)
			got = append(got, fmt.Sprintf("%v:%v:%v", e["line"], e["text"], e["match"] == true))
		}
		return got
	}

	tests := []struct {
		name  string
		who   *mcptest.Client
		sess  mcptest.Session
		args  map[string]any
		code  string
		field string
		check func(t *testing.T, r map[string]any)
	}{
		{name: "first bytes", args: map[string]any{"commandId": id, "maxBytes": 10}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "1\n2\n3\n4\n5\n" || r["bytes"] != 10.0 || r["eof"] != false || r["totalBytes"] != float64(len(want)) || r["nextOffset"] != 10.0 {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "the middle", args: map[string]any{"commandId": id, "offset": 10, "maxBytes": 6}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "6\n7\n8\n" || r["offset"] != 10.0 || r["nextOffset"] != 16.0 || r["eof"] != false {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "from the end", args: map[string]any{"commandId": id, "offset": -13}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "99999\n100000\n" || r["offset"] != float64(len(want)-13) || r["eof"] != true || r["exitCode"] != 0.0 || r["nextOffset"] != nil {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "stderr", args: map[string]any{"commandId": id, "stream": "stderr"}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "oops\n" || r["running"] != false {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "grep line numbers", args: map[string]any{"commandId": id, "grep": `^1234[05]$`}, check: func(t *testing.T, r map[string]any) {
			m, _ := r["matches"].([]any)
			if len(m) != 2 || m[0].(map[string]any)["line"] != 12340.0 || m[1].(map[string]any)["text"] != "12345" ||
				m[1].(map[string]any)["offset"] != float64(bytes.Index(want, []byte("\n12345\n"))+1) || r["eof"] != true {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "grep from an offset", args: map[string]any{"commandId": id, "grep": `^9999[0-9]$`, "offset": -20}, check: func(t *testing.T, r map[string]any) {
			m, _ := r["matches"].([]any)
			// -20 lands inside line 99997: lines that start after it count.
			if len(m) != 2 || m[0].(map[string]any)["line"] != 99998.0 || m[1].(map[string]any)["line"] != 99999.0 {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "grep bounded", args: map[string]any{"commandId": id, "grep": `7`, "maxBytes": 100}, check: func(t *testing.T, r map[string]any) {
			m, _ := r["matches"].([]any)
			if len(m) == 0 || len(m) > 100 || r["nextOffset"] == nil || r["eof"] != false {
				t.Errorf("%d matches: %v %v", len(m), r["nextOffset"], r["eof"])
			}
		}},
		{name: "grep context", args: map[string]any{"commandId": id, "grep": `^1234[05]$`, "context": 2}, check: func(t *testing.T, r map[string]any) {
			// The two matches' context overlaps: every line comes once.
			got := strings.Join(lines(r), " ")
			if got != "12338:12338:false 12339:12339:false 12340:12340:true 12341:12341:false 12342:12342:false 12343:12343:false 12344:12344:false 12345:12345:true 12346:12346:false 12347:12347:false" || r["eof"] != true {
				t.Errorf("%s: %s", got, mcptest.Short(r))
			}
		}},
		{name: "grep context at the ends", args: map[string]any{"commandId": id, "grep": `^(1|100000)$`, "context": 3}, check: func(t *testing.T, r map[string]any) {
			if got := strings.Join(lines(r), " "); got != "1:1:true 2:2:false 3:3:false 4:4:false 99997:99997:false 99998:99998:false 99999:99999:false 100000:100000:true" {
				t.Errorf("%s", got)
			}
		}},
		{name: "lossy", args: map[string]any{"commandId": latin}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "ok\uFFFD\n" || r["lossy"] != true || r["encoding"] != nil || r["bytes"] != 4.0 {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "exact bytes", args: map[string]any{"commandId": latin, "encoding": "base64"}, check: func(t *testing.T, r map[string]any) {
			if r["encoding"] != "base64" || r["data"] != base64.StdEncoding.EncodeToString([]byte("ok\377\n")) || r["lossy"] != nil {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "binary", args: map[string]any{"commandId": bin}, check: func(t *testing.T, r map[string]any) {
			if r["encoding"] != "base64" || r["data"] != base64.StdEncoding.EncodeToString([]byte("a\000b")) {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "text asked for", args: map[string]any{"commandId": id, "encoding": "text", "maxBytes": 2}, check: func(t *testing.T, r map[string]any) {
			if r["data"] != "1\n" || r["encoding"] != nil {
				t.Errorf("%s", mcptest.Short(r))
			}
		}},
		{name: "unknown command", args: map[string]any{"commandId": "cmd_0000000000000000"}, code: "unknown_command", field: "commandId"},
		{name: "missing command", args: map[string]any{}, code: "invalid_arguments", field: "commandId"},
		{name: "bad stream", args: map[string]any{"commandId": id, "stream": "both"}, code: "invalid_arguments", field: "stream"},
		{name: "bad grep", args: map[string]any{"commandId": id, "grep": `(`}, code: "invalid_arguments", field: "grep"},
		{name: "offset past the end", args: map[string]any{"commandId": id, "offset": len(want) + 1}, code: "invalid_arguments", field: "offset"},
		{name: "maxBytes over 1 MiB", args: map[string]any{"commandId": id, "maxBytes": 1<<20 + 1}, code: "invalid_arguments", field: "maxBytes"},
		{name: "unknown argument", args: map[string]any{"commandId": id, "limit": 5}, code: "invalid_arguments", field: "limit"},
		{name: "bad encoding", args: map[string]any{"commandId": id, "encoding": "hex"}, code: "invalid_arguments", field: "encoding"},
		{name: "base64 with grep", args: map[string]any{"commandId": id, "grep": "1", "encoding": "base64"}, code: "invalid_arguments", field: "encoding"},
		{name: "context without grep", args: map[string]any{"commandId": id, "context": 2}, code: "invalid_arguments", field: "context"},
		{name: "context over 10", args: map[string]any{"commandId": id, "grep": "1", "context": 11}, code: "invalid_arguments", field: "context"},
		{name: "negative context", args: map[string]any{"commandId": id, "grep": "1", "context": -1}, code: "invalid_arguments", field: "context"},
		{name: "another client's command", who: other, sess: so, args: map[string]any{"commandId": id}, code: "unknown_command", field: "commandId"},
		{name: "another client's session", who: other, args: map[string]any{"commandId": id}, code: "invalid_session_token"},
		{name: "wrong token", sess: mcptest.Session{Name: s.Name, Token: "nope"}, args: map[string]any{"commandId": id}, code: "invalid_session_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			who, sess := c, s
			if tc.who != nil {
				who = tc.who
			}
			if tc.sess.Name != "" {
				sess = tc.sess
			}
			r := readOutput(t, who, sess, tc.args)
			if tc.code != "" {
				mcptest.WantError(t, r, tc.code)
				if r["field"] != tc.field && !(tc.field == "" && r["field"] == nil) {
					t.Errorf("field %v, want %q", r["field"], tc.field)
				}
				if strings.Contains(mcptest.Str(r["message"]), "12345") {
					t.Errorf("an error leaked output: %s", r["message"])
				}
				return
			}
			tc.check(t, mcptest.MustOK(t, r))
		})
	}
}

// TestReadOutputLeavesTheGate: reading output, the human's included, never
// trips or resets the gate; the human's 5 MB output is bounded in the gate
// reply and reads back whole by its commandId.
func TestReadOutputLeavesTheGate(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "gated")
	agent := mcptest.MustOK(t, exec(t, c, s, "echo mine"))
	url := mcptest.Str(mcptest.MustOK(t, c.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	if !ok {
		t.Fatal("no session for the monitoring key")
	}
	if err := sess.Input(context.Background(), []byte("seq 1 735000\r")); err != nil {
		t.Fatal(err)
	}
	want := seqBytes(735000)
	// Wait until the human sees the prompt again, then read output: that
	// must not consume the gate.
	// The output's last lines, not the echoed command line: typed ahead of
	// the agent's prompt, the line's echo comes before a prompt too.
	waitScreen(t, sess, func(seen string) bool {
		i := strings.LastIndex(seen, "734999\r\n735000\r\n")
		return i >= 0 && (strings.HasSuffix(seen, "$ ") || strings.HasSuffix(seen, "# "))
	})
	for range 3 {
		if r := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": mcptest.Str(agent["commandId"])})); r["data"] != "mine\n" {
			t.Fatalf("agent output: %s", mcptest.Short(r))
		}
	}
	g := mcptest.WantError(t, exec(t, c, s, "true"), "user_activity_detected")
	raw, _ := json.Marshal(g)
	if len(raw) > 64<<10 {
		t.Fatalf("gate reply is %d bytes", len(raw))
	}
	uc := g["userCommands"].([]any)[0].(map[string]any)
	if uc["stdoutTruncated"] != true || uc["stdoutBytes"] != float64(len(want)) || !bytes.HasSuffix(want, []byte(mcptest.Str(uc["stdoutTail"]))) {
		t.Fatalf("human command: %s", mcptest.Short(uc))
	}
	if got := readBack(t, c, s, mcptest.Str(uc["commandId"]), "stdout"); !bytes.Equal(got, want) {
		t.Fatalf("human output read back: %d bytes, want %d", len(got), len(want))
	}
	if r := mcptest.Result(t, exec(t, c, s, "echo after")); r["stdout"] != "after\n" {
		t.Fatalf("after the gate: %v", r)
	}
}

// TestTimedOutCommandReadBack: a command that outlives its call's timeout
// keeps running; ssh_read_output follows it and then reports its exit code
// and duration.
func TestTimedOutCommandReadBack(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "slow")
	r := mcptest.WantError(t, c.Call(t, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
		"command": "echo started; sleep 1.5; echo done; (exit 3)", "timeoutSeconds": 0.5}), "command_timeout")
	id := mcptest.Str(r["commandId"])
	first := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": id}))
	if first["running"] != true || first["exitCode"] != nil || first["eof"] != false || first["data"] != "started\n" {
		t.Fatalf("while running: %s", mcptest.Short(first))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": id}))
		if got["running"] == false {
			if got["data"] != "started\ndone\n" || got["exitCode"] != 3.0 || got["eof"] != true || got["durationMs"].(float64) < 1500 {
				t.Fatalf("after it ended: %s", mcptest.Short(got))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestExitedSessionReadBack: the output of the command that ended the
// session (exit) stays readable with the session's token.
func TestExitedSessionReadBack(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "leaving")
	r := mcptest.WantError(t, exec(t, c, s, "seq 1 50000; exit 4"), "shell_exited")
	id := mcptest.Str(r["commandId"])
	if got := readBack(t, c, s, id, "stdout"); !bytes.Equal(got, seqBytes(50000)) {
		t.Fatalf("read back %d bytes", len(got))
	}
	mcptest.WantError(t, exec(t, c, s, "true"), "session_ended")
}

// waitScreen watches the session's terminal, as a viewer would, until done
// holds for everything shown so far.
func waitScreen(t *testing.T, sess *session.Session, done func(seen string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var seen strings.Builder
	found := errors.New("seen")
	err := sess.Watch(ctx, func(p []byte) error {
		seen.Write(p)
		if done(seen.String()) {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("the terminal never showed what was awaited (%v); last bytes: %q", err, tailOf(seen.String(), 200))
	}
}

func tailOf(s string, n int) string { return s[max(0, len(s)-n):] }
