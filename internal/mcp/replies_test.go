package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// The replies an agent reads (issue #18, point 7), through a real client
// and a real shell.

// callRaw calls a tool and returns the reply's JSON as sent, which is
// also its structuredContent, and the reply decoded.
func callRaw(t testing.TB, c *mcptest.Client, tool string, args map[string]any) (string, map[string]any) {
	t.Helper()
	res, err := c.CS.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*sdk.TextContent).Text, mcptest.Check(t, tool, res)
}

// TestGrepWithinBudget: grep over seq 1 200000 for 5$ (20,000 lines)
// answers in replies of at most the budget, JSON and all, and following
// nextOffset to eof gives every matching line once, in order.
func TestGrepWithinBudget(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "grep")
	id := mcptest.Str(mcptest.MustOK(t, exec(t, c, s, "seq 1 200000"))["commandId"])
	args := map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "commandId": id, "grep": "5$"}
	var got []string
	calls := 0
	for off := 0.0; ; calls++ {
		args["offset"] = off
		raw, r := callRaw(t, c, "ssh_read_output", args)
		mcptest.MustOK(t, r)
		if len(raw) > f.inline {
			t.Fatalf("call %d: the reply is %d bytes of JSON, over the budget of %d", calls, len(raw), f.inline)
		}
		for _, m := range r["matches"].([]any) {
			e := m.(map[string]any)
			if e["match"] != true || e["line"] != mustFloat(t, e["text"]) {
				t.Fatalf("call %d: %v", calls, e)
			}
			got = append(got, mcptest.Str(e["text"]))
		}
		if r["eof"] == true {
			if r["nextOffset"] != nil {
				t.Fatalf("eof with nextOffset: %s", mcptest.Short(r))
			}
			break
		}
		next, ok := r["nextOffset"].(float64)
		if !ok || next <= off {
			t.Fatalf("call %d: no progress from %v: %s", calls, off, mcptest.Short(r))
		}
		off = next
	}
	if len(got) != 20000 || calls < 2 {
		t.Fatalf("%d matches in %d calls", len(got), calls+1)
	}
	for i, g := range got {
		if g != strconv.Itoa(10*i+5) {
			t.Fatalf("match %d is %s, want %d", i, g, 10*i+5)
		}
	}
}

func mustFloat(t testing.TB, v any) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(mcptest.Str(v), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestGrepLongLine: a match 400,000 bytes into a single line is found,
// and comes as an excerpt around it, saying where it lies, so that its
// exact bytes are one read away.
func TestGrepLongLine(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "long")
	id := mcptest.Str(mcptest.MustOK(t, exec(t, c, s, `head -c 400000 /dev/zero | tr '\0' a; echo NEEDLE; echo short NEEDLE`))["commandId"])
	raw, r := callRaw(t, c, "ssh_read_output", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "commandId": id, "grep": "NEEDLE", "context": 1})
	mcptest.MustOK(t, r)
	m := r["matches"].([]any)
	if len(m) != 2 || r["eof"] != true || len(raw) > f.inline {
		t.Fatalf("%d bytes: %s", len(raw), mcptest.Short(r))
	}
	long, short := m[0].(map[string]any), m[1].(map[string]any)
	text := mcptest.Str(long["text"])
	if long["match"] != true || long["excerpt"] != true || long["line"] != 1.0 || long["offset"] != 0.0 ||
		long["lineBytes"] != 400006.0 || long["matchOffset"] != 400000.0 || len(text) > 2048 ||
		!strings.HasSuffix(text, "aaaNEEDLE") || long["textOffset"] != float64(400006-len(text)) {
		t.Fatalf("the long line: %v", mcptest.Short(long))
	}
	if short["text"] != "short NEEDLE" || short["match"] != true || short["excerpt"] != nil || short["line"] != 2.0 {
		t.Fatalf("the short line: %v", short)
	}
	exact := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": id, "offset": long["matchOffset"], "maxBytes": 6}))
	if exact["data"] != "NEEDLE" {
		t.Fatalf("at matchOffset: %s", mcptest.Short(exact))
	}
}

// latin1Log is a 60-line test log with one Latin-1 byte (é) and a failure,
// and the shell loop that prints it.
func latin1Log() ([]byte, string) {
	var b bytes.Buffer
	for i := 1; i <= 60; i++ {
		switch i {
		case 30:
			b.WriteString("caf\xe9 ok\n")
		case 59:
			b.WriteString("FAIL: TestCheckout\n")
		default:
			fmt.Fprintf(&b, "ok line %d\n", i)
		}
	}
	return b.Bytes(), `for i in $(seq 1 60); do case $i in 30) printf 'caf\351 ok\n';; 59) echo 'FAIL: TestCheckout';; *) echo "ok line $i";; esac; done`
}

// TestLossyLog: one Latin-1 byte in a 60-line log leaves it readable text
// (stdoutLossy), FAIL line and all; its exact bytes come back through
// ssh_read_output with encoding "base64".
func TestLossyLog(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "lossy")
	want, cmd := latin1Log()
	top := mcptest.MustOK(t, exec(t, c, s, cmd))
	r := mcptest.Result(t, top)
	out := mcptest.Str(r["stdout"])
	if r["stdoutEncoding"] != nil || r["stdoutLossy"] != true || out != strings.ToValidUTF8(string(want), "\uFFFD") ||
		!strings.Contains(out, "FAIL: TestCheckout\n") || !strings.Contains(out, "caf\uFFFD ok\n") {
		t.Fatalf("%s", mcptest.Short(r))
	}
	exact := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": top["commandId"], "encoding": "base64"}))
	got, err := base64.StdEncoding.DecodeString(mcptest.Str(exact["data"]))
	if err != nil || exact["encoding"] != "base64" || exact["eof"] != true || !bytes.Equal(got, want) {
		t.Fatalf("exact bytes: %q (%v)", got, err)
	}
	text := mcptest.MustOK(t, readOutput(t, c, s, map[string]any{"commandId": top["commandId"]}))
	if text["data"] != out || text["lossy"] != true {
		t.Fatalf("as text: %s", mcptest.Short(text))
	}
}

// TestProgressBarCollapsed: 20,000 redraws of a progress bar (half a
// megabyte) come as the frame last shown, whole within the budget; the
// stream keeps every byte.
func TestProgressBarCollapsed(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "progress")
	var want bytes.Buffer
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "\rdownloading %d/20000", i)
	}
	want.WriteString("\ndone\n")
	top := mcptest.MustOK(t, exec(t, c, s, `for i in $(seq 1 20000); do printf '\rdownloading %d/20000' $i; done; printf '\ndone\n'`))
	r := mcptest.Result(t, top)
	if r["stdout"] != "downloading 20000/20000\ndone\n" || r["stdoutFramesCollapsed"] != 20000.0 || r["stdoutTruncated"] != nil {
		t.Fatalf("%s", mcptest.Short(r))
	}
	if got := readBack(t, c, s, mcptest.Str(top["commandId"]), "stdout"); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("read back %d bytes, want %d", len(got), want.Len())
	}
}

// TestTruncatedReplyReads: a cut stream's facts come before its text in
// the reply, the head ends on a line and the tail starts on one.
func TestTruncatedReplyReads(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "order")
	raw, top := callRaw(t, c, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "seq 1 100000"})
	r := mcptest.Result(t, top)
	head, tail := mcptest.Str(r["stdout"]), mcptest.Str(r["stdoutTail"])
	if r["stdoutTruncated"] != true || !strings.HasSuffix(head, "\n") || !strings.HasPrefix(string(seqBytes(100000)), head) ||
		!strings.HasSuffix(string(seqBytes(100000)), "\n"+tail) {
		t.Fatalf("head ends %q, tail starts %q", head[max(0, len(head)-10):], tail[:min(len(tail), 10)])
	}
	order := []string{`"commandId"`, `"success"`, `"result"`, `"stdoutBytes"`, `"stdoutResource"`, `"stdoutTruncated"`, `"stdout":`, `"stdoutTail":`, `"stderr":`}
	last := -1
	for _, k := range order {
		i := strings.Index(raw, k)
		if i <= last {
			t.Fatalf("%s at %d, not after the key before it (%d): %.300s", k, i, last, raw)
		}
		last = i
	}
}

// TestGateRepliesReadable: a human's commands in the gate reply are
// rendered as the agent's are: a Latin-1 byte shows as U+FFFD with
// stdoutLossy, a progress bar as its last frame.
func TestGateRepliesReadable(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "gate")
	mcptest.MustOK(t, exec(t, c, s, "true"))
	url := mcptest.Str(mcptest.MustOK(t, c.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	if !ok {
		t.Fatal("no session for the monitoring key")
	}
	if err := sess.Input(context.Background(), []byte("printf 'caf\\351 %s\\n' human; for i in 1 2 3; do printf '\\rstep %d' $i; done; echo\r")); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, sess, func(seen string) bool {
		i := strings.LastIndex(seen, "step 3\r\n")
		return i >= 0 && (strings.Contains(seen[i:], "$ ") || strings.Contains(seen[i:], "# "))
	})
	g := mcptest.WantError(t, exec(t, c, s, "true"), "user_activity_detected")
	uc := g["userCommands"].([]any)[0].(map[string]any)
	out := mcptest.Str(uc["stdout"])
	if uc["stdoutEncoding"] != nil || uc["stdoutLossy"] != true || !strings.Contains(out, "caf\uFFFD human\n") ||
		!strings.Contains(out, "step 3\n") || strings.Contains(out, "step 2") || uc["stdoutFramesCollapsed"] != 3.0 {
		t.Fatalf("human command: %s", mcptest.Short(uc))
	}
}
