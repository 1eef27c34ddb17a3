package main

import (
	"context"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/mcptest"
)

// TestCommandOutlivesClientTimeout: an agent whose client gives up after 60
// seconds runs a 65-second command. tandem keeps the client informed (a
// notification at least every 10 s, though the command prints nothing for
// a minute), answers command_timeout before the client's patience runs out,
// and once the command has ended its output, exit code and duration read
// back by commandId through the real binary over stdio.
func TestCommandOutlivesClientTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for over a minute")
	}
	var mu sync.Mutex
	var notes []time.Time
	srv := startServer(t, serverOpts{progress: func(*sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		notes = append(notes, time.Now())
		mu.Unlock()
	}})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "patient"}))["sessionToken"])
	args := func(m map[string]any) map[string]any {
		m["sessionName"], m["sessionToken"] = "patient", tok
		return m
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // the client's patience
	defer cancel()
	params := &sdk.CallToolParams{Name: "ssh_exec", Arguments: args(map[string]any{
		"command": "echo begin; sleep 65; echo end; (exit 7)", "timeoutSeconds": 55})}
	params.SetProgressToken("long")
	start := time.Now()
	res, err := srv.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("the client gave up: %v", err)
	}
	answered := time.Now()
	r := wantError(t, mcptest.Check(t, "ssh_exec", res), "command_timeout")
	id := str(r["commandId"])

	mu.Lock()
	last := start
	for _, at := range notes {
		if gap := at.Sub(last); gap > 10*time.Second {
			t.Errorf("%v without a progress notification", gap.Round(time.Millisecond))
		}
		last = at
	}
	if gap := answered.Sub(last); gap > 10*time.Second {
		t.Errorf("%v between the last notification and the reply", gap)
	}
	mu.Unlock()

	deadline := time.Now().Add(30 * time.Second)
	for {
		got := mustOK(t, srv.call(t, "ssh_read_output", args(map[string]any{"commandId": id})))
		if got["running"] == false {
			if got["data"] != "begin\nend\n" || got["exitCode"] != 7.0 || got["eof"] != true || got["durationMs"].(float64) < 65000 {
				t.Fatalf("read back: %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command never ended")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := result(t, srv.call(t, "ssh_exec", args(map[string]any{"command": "echo next"}))); got["stdout"] != "next\n" {
		t.Fatalf("the session after the long command: %v", got)
	}
}
