package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

var update = flag.Bool("update", false, "rewrite the golden replies in testdata/golden")

// volatile are reply keys whose values change every run.
var volatile = map[string]bool{
	"sessionToken": true, "createdAt": true, "lastActivity": true, "timestamp": true,
	"userActivitySince": true, "runningSince": true, "endedAt": true, "durationMs": true,
	"duration": true, "commandId": true, "runningCommandId": true, "runningForMs": true, "historyId": true, "startedAt": true, "uri": true, "monitoringUrl": true, "loginStartMs": true, "cwd": true,
	"sandbox": true, // depends on the kernel; TestConnectReportsSandbox checks it
}

var tempPath = regexp.MustCompile(`/tmp/[^\s"']+`)

// normalize replaces volatile values with their key, so golden files hold
// the shape and the stable values of a reply.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			if volatile[k] {
				out[k] = "<" + k + ">"
			} else {
				out[k] = normalize(val)
			}
		}
		return out
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	case string:
		return tempPath.ReplaceAllString(x, "<tmp>")
	}
	return v
}

// golden compares a reply with testdata/golden/name.json.
func golden(t *testing.T, name string, reply map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(normalize(reply)); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/mcp -run TestGoldenReplies -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("reply %s changed; if intended, rerun with -update:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

// TestGoldenReplies pins the wire reply of every tool, for success and for
// each error code it can give.
func TestGoldenReplies(t *testing.T) {
	f := newServer(t, 64)
	c := f.client(t)
	valid := schemas(t, c)
	call := func(tool string, args map[string]any) map[string]any {
		r := c.Call(t, tool, args)
		valid(tool, r)
		return r
	}
	conn := call("ssh_connect", map[string]any{"name": "gold"})
	golden(t, "connect_ok", conn)
	s := mcptest.Session{Name: "gold", Token: mcptest.Str(conn["sessionToken"])}
	args := func(extra map[string]any) map[string]any {
		m := map[string]any{"sessionName": s.Name, "sessionToken": s.Token}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}

	steps := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"connect_exists", "ssh_connect", map[string]any{"name": "gold"}},
		{"connect_invalid_name", "ssh_connect", map[string]any{"name": "no spaces"}},
		{"connect_unknown_target", "ssh_connect", map[string]any{"name": "x", "target": "prod"}},
		{"connect_invalid_arguments", "ssh_connect", map[string]any{"name": "x", "port": "22", "host": "h", "username": "u"}},
		{"exec_ok", "ssh_exec", args(map[string]any{"command": "cd /tmp && echo out && echo err >&2"})},
		{"exec_nonzero", "ssh_exec", args(map[string]any{"command": "(exit 3)"})},
		{"exec_binary", "ssh_exec", args(map[string]any{"command": `printf '\377\000'`})},
		{"exec_lossy", "ssh_exec", args(map[string]any{"command": `printf 'caf\351\n'; printf '\r1%%\r2%%\rdone\n' >&2`})},
		{"exec_large", "ssh_exec", args(map[string]any{"command": "seq 1 40"})},
		{"exec_missing_token", "ssh_exec", map[string]any{"sessionName": "gold", "command": "true"}},
		{"exec_invalid_token", "ssh_exec", map[string]any{"sessionName": "gold", "sessionToken": "nope", "command": "true"}},
		{"exec_invalid_arguments", "ssh_exec", args(map[string]any{"command": "true", "bypassGate": true})},
		{"exec_timeout", "ssh_exec", args(map[string]any{"command": "echo started; sleep 5", "timeoutSeconds": 0.3})},
		{"exec_busy", "ssh_exec", args(map[string]any{"command": "true"})},
		{"cancel_ok", "ssh_cancel", args(nil)},
		{"cancel_not_running", "ssh_cancel", args(nil)},
		{"list_sessions", "ssh_list_sessions", map[string]any{}},
		{"monitoring_url", "ssh_get_monitoring_url", args(nil)},
	}
	var large, lossy string
	for _, st := range steps {
		r := call(st.tool, st.args)
		golden(t, st.name, r)
		switch st.name {
		case "exec_large":
			large = mcptest.Str(r["commandId"])
		case "exec_lossy":
			lossy = mcptest.Str(r["commandId"])
		}
	}
	for _, st := range []struct {
		name string
		args map[string]any
	}{
		{"read_output_ok", args(map[string]any{"commandId": large, "offset": -9})},
		{"read_output_next", args(map[string]any{"commandId": large, "maxBytes": 10})},
		{"read_output_lossy", args(map[string]any{"commandId": lossy})},
		{"read_output_base64", args(map[string]any{"commandId": lossy, "encoding": "base64"})},
		{"read_output_grep", args(map[string]any{"commandId": large, "grep": "^3[0-2]$"})},
		{"read_output_grep_context", args(map[string]any{"commandId": large, "grep": "^3[02]$", "context": 1, "maxBytes": 4096})},
		{"read_output_unknown_command", args(map[string]any{"commandId": "cmd_nope"})},
		{"read_output_command", args(map[string]any{"commandId": large, "stream": "command"})},
		{"read_output_invalid_arguments", args(map[string]any{"commandId": large, "offset": 1000})},
	} {
		golden(t, st.name, call("ssh_read_output", st.args))
	}

	// The gate: a human command, then the blocked call and the one after.
	url := mcptest.Str(call("ssh_get_monitoring_url", args(nil))["monitoringUrl"])
	sess, _ := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	if err := sess.Input(context.Background(), []byte("echo human; false\r")); err != nil {
		t.Fatal(err)
	}
	var gate map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if gate = call("ssh_exec", args(map[string]any{"command": "pwd"})); gate["error"] == "user_activity_detected" {
			break
		}
	}
	golden(t, "exec_user_activity", gate)
	golden(t, "exec_after_gate", call("ssh_exec", args(map[string]any{"command": "echo again"})))
	golden(t, "disconnect_ok", call("ssh_disconnect", args(nil)))
	golden(t, "exec_session_ended", call("ssh_exec", args(map[string]any{"command": "true"})))
}

// schemas returns a check that a tool's reply validates against the output
// schema the server lists for it, closed: every field of every object in
// the reply must be described, and nothing else may appear.
func schemas(t *testing.T, c *mcptest.Client) func(tool string, reply map[string]any) {
	t.Helper()
	list, err := c.CS.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resolved := map[string]*jsonschema.Resolved{}
	for _, tool := range list.Tools {
		if tool.Title == "" || tool.Annotations == nil || tool.Description == "" {
			t.Errorf("%s: title %q, annotations %v", tool.Name, tool.Title, tool.Annotations)
		}
		for _, in := range []any{tool.InputSchema, tool.OutputSchema} {
			m, _ := in.(map[string]any)
			props, _ := m["properties"].(map[string]any)
			for name, p := range props {
				if d, _ := p.(map[string]any)["description"].(string); d == "" && in == tool.InputSchema {
					t.Errorf("%s: input property %q has no description", tool.Name, name)
				}
			}
		}
		if tool.OutputSchema == nil {
			continue // permissions__approve answers in Claude Code's shape
		}
		b, _ := json.Marshal(closeSchema(tool.OutputSchema))
		var sch jsonschema.Schema
		if err := json.Unmarshal(b, &sch); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		rs, err := sch.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		resolved[tool.Name] = rs
	}
	return func(tool string, reply map[string]any) {
		t.Helper()
		rs := resolved[tool]
		if rs == nil {
			t.Fatalf("no output schema for %s", tool)
		}
		if err := rs.Validate(reply); err != nil {
			t.Errorf("%s reply does not match its output schema: %v\n%s", tool, err, mcptest.Short(reply))
		}
	}
}

// closeSchema forbids, in a copy of s, every property no schema describes.
func closeSchema(s any) any {
	switch x := s.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range x {
			out[k] = closeSchema(v)
		}
		if _, ok := x["properties"]; ok {
			out["additionalProperties"] = false
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			out[i] = closeSchema(v)
		}
		return out
	}
	return s
}
