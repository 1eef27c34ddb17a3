package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestUserRCOutsideTheSandboxIsNotRead: a sandboxed local session is not
// told to source the user's ~/.bashrc when its sandbox cannot read it (as
// root, /root is not granted): the terminal starts without bash's
// "Permission denied". A target whose readOnly list grants the home
// directory still loads it.
func TestUserRCOutsideTheSandboxIsNotRead(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".bashrc"), []byte("echo user-rc-$((40+2))\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, extra string
		wantRC      bool
	}{
		{"not granted", "", false},
		{"granted", ", readOnly: [" + filepath.Join(home, ".bashrc") + "]", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			srv := startServer(t, serverOpts{dir: ws, home: home,
				config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + tc.extra + "}\n"})
			s := connectTo(t, srv, "dev", "dev")
			mustOK(t, s.exec(t, "echo after-$((1+1))"))
			mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
			screen := scrollback(t, mon, dataDirToken(t, srv.dataDir), "after-2")
			if strings.Contains(screen, "Permission denied") || strings.Contains(screen, ".bashrc") {
				t.Errorf("the terminal shows an rc error: %q", tail(screen))
			}
			if got := strings.Contains(screen, "user-rc-42"); got != tc.wantRC {
				t.Errorf("user rc ran: %v, want %v: %q", got, tc.wantRC, tail(screen))
			}
		})
	}
}

// scrollback is what the monitoring page's terminal shows, read over its
// WebSocket as the operator's browser would, up to want.
func scrollback(t *testing.T, monitorURL, token, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(monitorURL, "http")+"/ws", &websocket.DialOptions{HTTPHeader: operatorHeader(monitorURL, token)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	c.SetReadLimit(16 << 20)
	var seen strings.Builder
	for !strings.Contains(seen.String(), want) {
		typ, p, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("terminal never showed %q: %v; its tail was %q", want, err, tail(seen.String()))
		}
		if typ == websocket.MessageBinary {
			seen.Write(p)
		}
	}
	return seen.String()
}
