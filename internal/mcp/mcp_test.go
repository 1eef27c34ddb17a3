package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/target"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	os.Exit(m.Run())
}

type fixture struct {
	srv       *mcp.Server
	sessions  *session.Manager
	inline    int
	workspace string // the local target's
}

// newServer builds tandem's MCP server in-process with one sandboxed local
// target, as `tandem serve` does.
func newServer(t testing.TB, inline int) *fixture {
	t.Helper()
	return newServerWith(t, inline, nil)
}

// newServerWith is newServer with deps adjusted by tune.
func newServerWith(t testing.TB, inline int, tune func(*mcp.Deps)) *fixture {
	t.Helper()
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	runDir := filepath.Join(state, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	switch {
	case inline == 0:
		inline = config.DefaultInlineOutputBytes
	case inline < 0:
		inline = 0 // no bound
	}
	workspace, home := t.TempDir(), t.TempDir()
	m := session.NewManager(&session.Options{Spool: &spool.Dir{Path: filepath.Join(state, "spool"), Inline: spool.DefaultInline}})
	// Registered after every temporary directory, so it runs before them.
	t.Cleanup(m.Shutdown)
	deps := mcp.Deps{
		Sessions: m,
		Targets: &target.Resolver{Config: config.Default(workspace), Stdio: true, Self: self,
			Home: home, RunDir: runDir, Env: []string{"PATH=" + os.Getenv("PATH")}},
		MonitorURL:        func(key string) string { return "http://127.0.0.1:1/s/" + key },
		CommandTimeout:    30 * time.Second,
		InlineOutputBytes: inline,
	}
	if tune != nil {
		tune(&deps)
	}
	return &fixture{srv: mcp.New(deps), sessions: m, inline: inline, workspace: workspace}
}

// client connects one more in-memory MCP client to the server.
func (f *fixture) client(t testing.TB) *mcptest.Client {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	return &mcptest.Client{CS: cs}
}

func connect(t testing.TB, c *mcptest.Client, name string) mcptest.Session {
	t.Helper()
	r := mcptest.MustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": name}))
	return mcptest.Session{Name: name, Token: mcptest.Str(r["sessionToken"])}
}

func exec(t testing.TB, c *mcptest.Client, s mcptest.Session, cmd string) map[string]any {
	t.Helper()
	return c.Call(t, "ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": cmd})
}

// TestIsolationOneServer: two clients of one server process.
func TestIsolationOneServer(t *testing.T) {
	f := newServer(t, 0)
	a, b := f.client(t), f.client(t)
	sa, sb := connect(t, a, "alpha"), connect(t, b, "beta")
	mcptest.AssertIsolated(t, a, b, sa, sb)
	// Names are per caller: b's own "alpha" tells b nothing of a's, and
	// touches nothing of it; a second "alpha" of a's own is refused.
	sb2 := connect(t, b, "alpha")
	mcptest.WantError(t, a.Call(t, "ssh_connect", map[string]any{"name": "alpha"}), "session_exists")
	mcptest.MustOK(t, exec(t, b, sb2, "cd / && export WHO=b"))
	if r := mcptest.Result(t, exec(t, a, sa, "echo ok $WHO; pwd")); r["stdout"] == "ok b\n/\n" || r["stdout"] != "ok\n"+mcptest.Str(r["cwd"])+"\n" {
		t.Errorf("a's alpha after b made its own: %v", r)
	}
}

// TestClosedClientEndsItsSessions: when a connection goes, its sessions end.
func TestClosedClientEndsItsSessions(t *testing.T) {
	f := newServer(t, 0)
	a := f.client(t)
	connect(t, a, "gone")
	_ = a.CS.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := f.sessions.ByMonitorKey("x"); !ok && f.sessions.Count() == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d sessions still live after their client left", f.sessions.Count())
}

func TestMalformedArguments(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	s := connect(t, c, "args")
	tests := []struct {
		tool  string
		args  any
		field string
	}{
		{"ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": 42}, "command"},
		{"ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "true", "bypassGate": true}, "bypassGate"},
		{"ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}, "command"},
		{"ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "true", "timeoutSeconds": -1}, "timeoutSeconds"},
		{"ssh_exec", map[string]any{"sessionName": s.Name, "sessionToken": s.Token, "command": "true", "timeoutSeconds": "soon"}, "timeoutSeconds"},
		{"ssh_connect", map[string]any{}, "name"},
		{"ssh_connect", map[string]any{"name": "x", "port": "22", "host": "h", "username": "u"}, "port"},
		{"ssh_connect", map[string]any{"name": "x", "host": "h"}, "username"},
		{"ssh_connect", map[string]any{"name": "x", "target": "local", "host": "h"}, "target"},
		{"ssh_list_sessions", map[string]any{"all": true}, "all"},
	}
	for _, tc := range tests {
		r := mcptest.WantError(t, c.Call(t, tc.tool, tc.args), "invalid_arguments")
		if r["field"] != tc.field {
			t.Errorf("%s %v: field %v, want %q (%s)", tc.tool, tc.args, r["field"], tc.field, r["message"])
		}
	}
	// Nothing was lost: the session still works.
	if r := mcptest.Result(t, exec(t, c, s, "echo intact")); r["stdout"] != "intact\n" {
		t.Errorf("after bad calls: %v", r)
	}
}

// TestProgressStreamsOutput: a client that asks for progress sees output
// while the command runs, before the reply.
func TestProgressStreamsOutput(t *testing.T) {
	f := newServer(t, 0)
	got := make(chan string, 100)
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := sdk.NewClient(&sdk.Implementation{Name: "p", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			got <- r.Params.Message
		}})
	cs, err := cl.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	c := &mcptest.Client{CS: cs}
	s := connect(t, c, "prog")
	params := &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
		"command": "for i in 1 2 3; do echo tick$i; sleep 0.4; done"}}
	params.SetProgressToken("p-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	r := mcptest.Result(t, mcptest.Check(t, "ssh_exec", res))
	if r["stdout"] != "tick1\ntick2\ntick3\n" {
		t.Errorf("reply: %v", r)
	}
	var msgs []string
	for drained := false; !drained; {
		select {
		case m := <-got:
			msgs = append(msgs, m)
		default:
			drained = true
		}
	}
	if len(msgs) < 2 || msgs[0] != "tick1\n" {
		t.Errorf("progress messages %q: want tick1 first and more than one", msgs)
	}
}

// TestProgressHeartbeats: a command that prints nothing still sends a
// notification every heartbeat, with a rising progress value, so a client
// that resets its timeout on progress keeps waiting.
func TestProgressHeartbeats(t *testing.T) {
	f := newServerWith(t, 0, func(d *mcp.Deps) { d.Heartbeat = 300 * time.Millisecond })
	type note struct {
		at       time.Time
		progress float64
		msg      string
	}
	got := make(chan note, 100)
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := f.srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "p", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			got <- note{time.Now(), r.Params.Progress, r.Params.Message}
		}}).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = ss.Close() })
	s := connect(t, &mcptest.Client{CS: cs}, "quiet")
	params := &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{"sessionName": s.Name, "sessionToken": s.Token,
		"command": "sleep 2"}}
	params.SetProgressToken("p-2")
	start := time.Now()
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	close(got)
	prev, last := -1.0, start
	n := 0
	for nt := range got {
		if nt.msg != "" || nt.progress <= prev {
			t.Errorf("heartbeat %d: message %q, progress %v after %v", n, nt.msg, nt.progress, prev)
		}
		if gap := nt.at.Sub(last); gap > 1500*time.Millisecond {
			t.Errorf("%v without a notification", gap)
		}
		prev, last = nt.progress, nt.at
		n++
	}
	if n < 3 || end.Sub(last) > 1500*time.Millisecond {
		t.Errorf("%d heartbeats over %v, the last %v before the reply", n, end.Sub(start), end.Sub(last))
	}
}

// TestGateOutputAsResource: a human's large output reaches the agent
// complete through the gate, as a resource only the session owner can read.
func TestGateOutputAsResource(t *testing.T) {
	f := newServer(t, 2048)
	owner, other := f.client(t), f.client(t)
	s := connect(t, owner, "big-human")
	url := mcptest.Str(mcptest.MustOK(t, owner.Call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.Name, "sessionToken": s.Token}))["monitoringUrl"])
	sess, ok := f.sessions.ByMonitorKey(url[strings.LastIndex(url, "/")+1:])
	if !ok {
		t.Fatal("no session for the monitoring key")
	}
	if err := sess.Input(context.Background(), []byte("seq 1 5000\r")); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	var g map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		g = exec(t, owner, s, "true")
		if g["error"] == "user_activity_detected" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmds, _ := g["userCommands"].([]any)
	if len(cmds) != 1 {
		t.Fatalf("gate reply: %s", mcptest.Short(g))
	}
	uc := cmds[0].(map[string]any)
	res, _ := uc["stdoutResource"].(map[string]any)
	if res == nil || len(mcptest.Str(uc["stdout"])) > 2048 || uc["stdoutTruncated"] != true {
		t.Fatalf("user command not inline-limited: %s", mcptest.Short(uc))
	}
	uri := mcptest.Str(res["uri"])
	r, err := owner.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil || r.Contents[0].Text != want.String() {
		t.Fatalf("owner read: %v (%d bytes)", err, len(r.Contents[0].Text))
	}
	if _, err := other.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri}); err == nil {
		t.Error("another client read the session owner's output")
	}
}

// TestHostilePageNumbers: page numbers that would overflow the offset are
// refused, and the server keeps serving (issue 6 item 12).
func TestHostilePageNumbers(t *testing.T) {
	f := newServer(t, 64)
	c := f.client(t)
	s := connect(t, c, "pages")
	r := mcptest.Result(t, exec(t, c, s, "seq 1 1000"))
	res, _ := r["stdoutResource"].(map[string]any)
	if res == nil {
		t.Fatalf("no resource: %v", r)
	}
	uri := mcptest.Str(res["uri"])
	for _, page := range []string{"2199023255552", "9223372036854775807", "-1", "1", "x"} {
		if _, err := c.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=" + page}); err == nil {
			t.Errorf("page %s: no error", page)
		}
	}
	if _, err := c.CS.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=0"}); err != nil {
		t.Fatalf("page 0 after hostile pages: %v", err)
	}
	if r := mcptest.Result(t, exec(t, c, s, "echo alive")); r["stdout"] != "alive\n" {
		t.Fatalf("session after hostile pages: %v", r)
	}
}

// TestConnectReportsSandbox: a local session's connect reply says what the
// sandbox enforces on this kernel.
func TestConnectReportsSandbox(t *testing.T) {
	f := newServer(t, 0)
	c := f.client(t)
	r := mcptest.MustOK(t, c.Call(t, "ssh_connect", map[string]any{"name": "sb"}))
	got, _ := json.Marshal(r["sandbox"])
	want, _ := json.Marshal(sandbox.Describe(sandbox.NetNamespace))
	var wantMap any
	_ = json.Unmarshal(want, &wantMap)
	want, _ = json.Marshal(wantMap)
	if string(got) != string(want) {
		t.Fatalf("sandbox = %s, want %s", got, want)
	}
	var e sandbox.Enforcement
	_ = json.Unmarshal(got, &e)
	if e.LandlockABI < 4 || e.Network != "namespace" || !strings.HasPrefix(e.TCP, "no way out") || len(e.NotEnforced) == 0 {
		t.Fatalf("sandbox description: %+v", e)
	}
}
