package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// waitFile waits for a file a command writes when it has started.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared: the command did not start", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// usableAgain waits for the session to take a command after a cancelled
// one, within the cancel's grace; busy is the only refusal allowed.
func usableAgain(t *testing.T, exec func(cmd string) map[string]any) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := exec("echo next")
		if r["success"] == true {
			return
		}
		if r["error"] != "session_busy" || time.Now().After(deadline) {
			t.Fatalf("after the cancel: %v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// auditedOutcome waits for the audit record of the ssh_exec whose command
// contains marker, and returns its outcome.
func auditedOutcome(t *testing.T, dataDir, marker string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, r := range auditJSON(t, dataDir) {
			if r.Tool == "ssh_exec" && bytes.Contains(r.Args, []byte(marker)) {
				return r.Outcome
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no audit record of the command %s", marker)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHTTPClientCancel: over HTTP, a client's cancel of a running ssh_exec
// interrupts its command as over stdio. The TypeScript SDK (protocol
// 2025-11-25) cancels with notifications/cancelled, a request of its own
// that the stateless handler cannot match to the call; the go-sdk
// (2026-07-28) drops the call's request. Either way the session takes the
// next command at once and the audit records the call as cancelled.
func TestHTTPClientCancel(t *testing.T) {
	ws := t.TempDir()
	s := startHTTP(t, httpOpts{config: fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: %s}\n", ws)})
	type client struct {
		call   func(t *testing.T, tool string, args map[string]any) map[string]any
		cancel func(t *testing.T, args map[string]any, started string) (callErr string)
	}
	clients := []struct {
		name string
		open func(t *testing.T, token string) client
	}{
		{"typescript-sdk", func(t *testing.T, token string) client {
			c := startTSClientEnv(t, []string{"TANDEM_TOKEN=" + token}, "--http", s.url)
			return client{
				call: func(t *testing.T, tool string, args map[string]any) map[string]any {
					t.Helper()
					return c.mustDo(t, map[string]any{"op": "call", "tool": tool, "args": args}).Reply
				},
				cancel: func(t *testing.T, args map[string]any, started string) string {
					t.Helper()
					return c.mustDo(t, map[string]any{"op": "cancel", "tool": "ssh_exec", "args": args, "when": started}).Error
				},
			}
		}},
		{"go-sdk", func(t *testing.T, token string) client {
			c := s.client(t, token)
			return client{
				call: func(t *testing.T, tool string, args map[string]any) map[string]any {
					t.Helper()
					return c.Call(t, tool, args)
				},
				cancel: func(t *testing.T, args map[string]any, started string) string {
					t.Helper()
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() {
						_, err := c.CS.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: args})
						done <- err
					}()
					waitFile(t, started)
					cancel()
					if err := <-done; err != nil {
						return err.Error()
					}
					t.Fatal("the cancelled call returned no error")
					return ""
				},
			}
		}},
	}
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			c := cl.open(t, s.token(t, "--tenant", "default", "--actor", cl.name))
			tok := str(mustOK(t, c.call(t, "ssh_connect", map[string]any{"name": cl.name}))["sessionToken"])
			args := func(cmd string) map[string]any {
				return map[string]any{"sessionName": cl.name, "sessionToken": tok, "command": cmd}
			}
			started := filepath.Join(ws, "started-"+cl.name)
			marker := "sleep 61 # " + cl.name
			callErr := c.cancel(t, args("touch "+started+"; "+marker), started)
			if !strings.Contains(strings.ToLower(callErr), "cancel") {
				t.Errorf("the cancelled call ended with %q", callErr)
			}
			usableAgain(t, func(cmd string) map[string]any { return c.call(t, "ssh_exec", args(cmd)) })
			if got := auditedOutcome(t, s.dataDir, marker); got != "cancelled" {
				t.Errorf("audit outcome %q, want cancelled", got)
			}
		})
	}
}

// rawMCP posts one JSON-RPC message to the MCP endpoint as a 2025-11-25
// client would, and returns the status and the whole response body.
func rawMCP(ctx context.Context, url, token, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestHTTPCancelOnlyOwnCalls: a notifications/cancelled names a call by
// its JSON-RPC id, which is the client's own; tandem matches it only
// against calls of the same verified caller. Another agent run of the same
// actor, and another tenant, sending the same id interrupt nothing; the
// caller's own cancel does. An id is matched with its type: the string "7"
// is not the number 7.
func TestHTTPCancelOnlyOwnCalls(t *testing.T) {
	w := newTwoTenants(t, "")
	ws := w.acmeBuild
	s := startHTTP(t, httpOpts{config: w.yaml})
	own := s.token(t, "--tenant", "acme", "--actor", "alice", "--workspace", "ci", "--sid", "run1")
	tok := str(mustOK(t, s.client(t, own).Call(t, "ssh_connect", map[string]any{"name": "main", "target": "build"}))["sessionToken"])
	others := map[string]string{
		"another run of alice": s.token(t, "--tenant", "acme", "--actor", "alice", "--workspace", "ci", "--sid", "run2"),
		"another tenant":       s.token(t, "--tenant", "beta", "--actor", "alice", "--sid", "run1"),
	}
	type outcome struct {
		status int
		body   string
		err    error
	}
	start := func(id, cmd string) <-chan outcome {
		args, _ := json.Marshal(map[string]any{"sessionName": "main", "sessionToken": tok, "command": cmd})
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"ssh_exec","arguments":` + string(args) + `}}`
		ch := make(chan outcome, 1)
		go func() {
			st, b, err := rawMCP(context.Background(), s.url, own, body)
			ch <- outcome{st, b, err}
		}()
		return ch
	}
	cancel := func(token, id string) {
		t.Helper()
		st, b, err := rawMCP(context.Background(), s.url, token,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`,"reason":"test"}}`)
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: %d %s %v", st, b, err)
		}
	}

	// Others cancel id 7 while it runs, and the caller cancels "7": the
	// command runs to its end.
	started := filepath.Join(ws, "started-1")
	res := start("7", "touch "+started+"; sleep 1; echo finished")
	waitFile(t, started)
	for _, token := range others {
		cancel(token, "7")
	}
	cancel(own, `"7"`)
	o := <-res
	if o.err != nil || o.status != http.StatusOK || !strings.Contains(o.body, `finished\\n`) || strings.Contains(o.body, "cancelled") {
		t.Fatalf("a call that only others cancelled: %d %v\n%s", o.status, o.err, o.body)
	}

	// The caller's own cancel of the number 7 interrupts it.
	started = filepath.Join(ws, "started-2")
	res = start("7", "touch "+started+"; sleep 62")
	waitFile(t, started)
	cancel(own, "7")
	select {
	case o = <-res:
	case <-time.After(15 * time.Second):
		t.Fatal("the caller's own cancel did not end its call")
	}
	if o.err != nil || !strings.Contains(o.body, `"error":"cancelled"`) {
		t.Fatalf("the cancelled call's reply: %d %v\n%s", o.status, o.err, o.body)
	}
	if got := auditedOutcome(t, s.dataDir, "sleep 62"); got != "cancelled" {
		t.Errorf("audit outcome %q, want cancelled", got)
	}
}

// TestHTTPOversizedBody: a request body past the SDK's 4 MiB limit is
// refused with 413, though tandem reads ahead in the body to find the
// call's id, and the server serves the next request.
func TestHTTPOversizedBody(t *testing.T) {
	ws := t.TempDir()
	// limits.uploadBytes sets how long a message may be (an upload's
	// base64 and 1 MiB more), never under the SDK's own 4 MiB.
	tests := []struct {
		uploadBytes int
		body        int // bytes of the command's string
		want        int
	}{
		{1 << 20, sdk.DefaultMaxRequestBodyBytes, http.StatusRequestEntityTooLarge},
		{3 << 20, sdk.DefaultMaxRequestBodyBytes, http.StatusOK},
		{3 << 20, mcp.MessageBytes(3 << 20), http.StatusRequestEntityTooLarge},
	}
	for _, tc := range tests {
		s := startHTTP(t, httpOpts{config: fmt.Sprintf("targets:\n  - {name: local, kind: local, workspace: %s}\nlimits: {uploadBytes: %d}\n", ws, tc.uploadBytes)})
		token := s.token(t, "--tenant", "default", "--actor", "a")
		big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_exec","arguments":{"command":"` +
			strings.Repeat("x", tc.body) + `"}}}`
		st, b, err := rawMCP(context.Background(), s.url, token, big)
		if err != nil || st != tc.want {
			t.Fatalf("uploadBytes %d, a %d-byte body: %d %v %.300s; want %d", tc.uploadBytes, len(big), st, err, b, tc.want)
		}
		mustOK(t, s.client(t, token).Call(t, "ssh_connect", map[string]any{"name": "after"}))
	}
}

// TestForwardedCallCancel: in a cluster, a client that calls through node
// B a session that node A holds cancels as it would on one node. B
// forwards the call to A; the go-sdk's dropped request ends B's forward,
// and so A's call; the TypeScript SDK's notifications/cancelled, which B
// would otherwise serve itself, B sends on to A, where the call runs.
func TestForwardedCallCancel(t *testing.T) {
	ws := t.TempDir()
	pg := testenv.Postgres(t)
	nodes, _ := startNodes(t, 2, pg, "targets: [{name: local, kind: local, workspace: "+ws+"}]\n")
	a, b := nodes[0], nodes[1]
	for _, name := range []string{"typescript-sdk", "go-sdk"} {
		t.Run(name, func(t *testing.T) {
			tok := a.token(t, "--tenant", "default", "--actor", name)
			viaA, viaB := a.client(t, tok), b.client(t, tok)
			tokS := str(mustOK(t, viaA.Call(t, "ssh_connect", map[string]any{"name": name}))["sessionToken"])
			args := func(cmd string) map[string]any {
				return map[string]any{"sessionName": name, "sessionToken": tokS, "command": cmd}
			}
			started := filepath.Join(ws, "started-"+name)
			marker := "sleep 63 # " + name
			cmd := "touch " + started + "; " + marker
			var callErr string
			// The next calls go through the client that cancelled: two
			// clients of one agent run share its JSON-RPC id space, and a
			// late notifications/cancelled would end the other's call of
			// the same id too.
			next := func(cmd string) map[string]any { return viaB.Call(t, "ssh_exec", args(cmd)) }
			if name == "typescript-sdk" {
				ts := startTSClientEnv(t, []string{"TANDEM_TOKEN=" + tok}, "--http", b.url)
				callErr = ts.mustDo(t, map[string]any{"op": "cancel", "tool": "ssh_exec", "args": args(cmd), "when": started}).Error
				next = func(cmd string) map[string]any {
					return ts.mustDo(t, map[string]any{"op": "call", "tool": "ssh_exec", "args": args(cmd)}).Reply
				}
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := viaB.CS.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: args(cmd)})
					done <- err
				}()
				waitFile(t, started)
				cancel()
				if err := <-done; err != nil {
					callErr = err.Error()
				}
			}
			if !strings.Contains(strings.ToLower(callErr), "cancel") {
				t.Errorf("the cancelled call ended with %q", callErr)
			}
			usableAgain(t, next)
		})
	}
}

// TestCancelThroughAnyNode: a balancer may bring a client's
// notifications/cancelled to a node that neither runs the call nor
// forwarded it (the call's own request still holds the connection it came
// on). That node sends it on to the nodes that hold the caller's sessions,
// and the call ends there.
func TestCancelThroughAnyNode(t *testing.T) {
	ws := t.TempDir()
	nodes, _ := startNodes(t, 3, testenv.Postgres(t), "targets: [{name: local, kind: local, workspace: "+ws+"}]\n")
	a, b, c := nodes[0], nodes[1], nodes[2]
	tok := a.token(t, "--tenant", "default", "--actor", "alice")
	tokS := str(mustOK(t, a.client(t, tok).Call(t, "ssh_connect", map[string]any{"name": "dev"}))["sessionToken"])
	started := filepath.Join(ws, "started")
	args, _ := json.Marshal(map[string]any{"sessionName": "dev", "sessionToken": tokS, "command": "touch " + started + "; sleep 64"})
	type outcome struct {
		body string
		err  error
	}
	res := make(chan outcome, 1)
	go func() {
		// Through B, which forwards it to A.
		_, body, err := rawMCP(context.Background(), b.url, tok,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_exec","arguments":`+string(args)+`}}`)
		res <- outcome{body, err}
	}()
	waitFile(t, started)
	st, body, err := rawMCP(context.Background(), c.url, tok, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("notifications/cancelled through C: %d %s %v", st, body, err)
	}
	select {
	case o := <-res:
		if o.err != nil || !strings.Contains(o.body, `"error":"cancelled"`) {
			t.Fatalf("the call's reply: %v\n%s", o.err, o.body)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a cancel sent through a third node did not end the call")
	}
}
