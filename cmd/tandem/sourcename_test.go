package main

import (
	"testing"
)

// TestListSessionsNamesTheHuman: ssh_list_sessions names a command the
// human typed with source "human", as every other reply does (it said
// "user"), and one of the agent's with "agent".
func TestListSessionsNamesTheHuman(t *testing.T) {
	ws := t.TempDir()
	srv := startServer(t, serverOpts{dir: ws, config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\n"})
	s := connectTo(t, srv, "dev", "dev")
	mon := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	tests := []struct {
		who, command string
	}{
		{"agent", "echo by-agent"},
		{"human", "echo by-human-$((2+2))"},
	}
	for _, tc := range tests {
		t.Run(tc.who, func(t *testing.T) {
			if tc.who == "human" {
				typeOverWebSocket(t, mon, dataDirToken(t, srv.dataDir), tc.command+"\r", "by-human-4\r\n")
			} else {
				mustOK(t, s.exec(t, tc.command))
			}
			var last map[string]any
			waitUntil(t, func() bool {
				sessions, _ := mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{}))["sessions"].([]any)
				if len(sessions) == 1 {
					last, _ = sessions[0].(map[string]any)["lastCommand"].(map[string]any)
				}
				return last != nil && last["command"] == tc.command && last["state"] == "ended"
			})
			if last["source"] != tc.who {
				t.Errorf("lastCommand.source = %v, want %q: %v", last["source"], tc.who, last)
			}
		})
	}
}
