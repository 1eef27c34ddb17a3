package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestCredentialsNeverOnThePage: with redact.viewers off, a credential's
// secret that a server echoes back (in a header and in its body) is
// redacted in what a live viewer of the page receives, in the recording
// and in every audit record, as it is in the agent's reply; so is the
// secret where the agent or a human types it. Every file of the data dir
// (the audit, the history rows, the recording, the spool) is free of it.
func TestCredentialsNeverOnThePage(t *testing.T) {
	var tb [20]byte
	if _, err := rand.Read(tb[:]); err != nil {
		t.Fatal(err)
	}
	token := "tok_" + hex.EncodeToString(tb[:])
	api := newAPIServer(t, token)
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	port := strconv.Itoa(api.port)
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: ["api.test:%s"], hosts: {api.test: 127.0.0.1},`+
			` credentials: [{name: api, host: api.test, value: "Bearer {secret}", secretFile: %s, caFile: %s}]}`, port, tokenFile, api.certFile),
	}, "")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	s := connectTo(t, srv, "dev", "creds")
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	opToken := dataDirToken(t, srv.dataDir)

	// A viewer who watches from the start: the terminal's bytes and the
	// page's strip (text messages), everything the page is sent.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	live, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(mon, "http")+"/ws", &websocket.DialOptions{HTTPHeader: operatorHeader(mon, opToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.CloseNow()
	live.SetReadLimit(16 << 20)
	var mu sync.Mutex
	var seen, term strings.Builder
	seenDone := make(chan struct{})
	go func() {
		defer close(seenDone)
		for {
			typ, p, err := live.Read(ctx)
			if err != nil {
				return
			}
			mu.Lock()
			seen.Write(p)
			seen.WriteByte('\n')
			if typ == websocket.MessageBinary {
				term.Write(p)
			}
			done := strings.Contains(term.String(), "viewer-4\r\n")
			mu.Unlock()
			if done {
				return
			}
		}
	}()

	// The server echoes the token in its X-Echo header and its body.
	r := result(t, s.exec(t, "curl -sS -f -D - https://api.test:"+port+"/repos/acme/echo; echo agent-done", 30))
	if out := str(r["stdout"]); strings.Contains(out, token) || strings.Count(out, "[REDACTED:credential]") < 2 || !strings.Contains(out, "agent-done") {
		t.Fatalf("the agent's reply: %q", out)
	}
	// The agent's line and a human's hold it too, as if they had guessed
	// it: short lines at a short prompt, as a line the terminal wraps
	// shows the secret in two pieces no redactor of the stream can join.
	mustOK(t, s.exec(t, "cd /"))
	mustOK(t, s.exec(t, ": "+token))
	typeOverWebSocket(t, mon, opToken, ": "+token+"; echo human-$((6*7))\r", "human-42\r\n")
	wantError(t, gateOf(t, s), "user_activity_detected")
	mustOK(t, s.exec(t, "echo viewer-$((2+2))"))
	select {
	case <-seenDone:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("the live viewer never saw the last command; it saw:\n%s", lastN(term.String(), 2000))
	}
	mu.Lock()
	page, screen := seen.String(), term.String()
	mu.Unlock()
	noSecret(t, "what the live viewer received", page, []string{token})
	if n := strings.Count(screen, "[REDACTED:credential]"); n < 4 {
		t.Errorf("the live terminal shows %d credential markers, want 4 at least (header, body, the agent's and the human's lines):\n%s", n, lastN(screen, 3000))
	}
	mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))

	castFile, _, events := onlyCast(t, srv.dataDir)
	var cast strings.Builder
	for _, e := range events {
		cast.WriteString(e.Data)
	}
	if !strings.Contains(cast.String(), "[REDACTED:credential]") {
		t.Errorf("the recording shows no marker:\n%s", lastN(cast.String(), 2000))
	}
	raw, err := os.ReadFile(castFile)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "the recording's file", string(raw), []string{token})

	recs := auditRecords(t, srv.dataDir)
	var calls int
	for _, rec := range recs {
		if line := fmt.Sprintf("%+v %s", rec, rec.Args); strings.Contains(line, token) {
			t.Errorf("an audit record holds the token: %s", line)
		}
		if rec.Event == "tool_call" && strings.Contains(string(rec.Args), "[REDACTED:credential]") {
			calls++
		}
	}
	if calls == 0 {
		t.Errorf("no tool_call record of %d shows the agent's line with its marker", len(recs))
	}

	// Nothing tandem keeps holds it: the audit and history database, the
	// recording, the spooled output.
	_ = srv.cs.Close() // ends tandem: every row is written
	_ = filepath.WalkDir(srv.dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), token) {
			t.Errorf("%s holds the token", p)
		}
		return nil
	})
}
