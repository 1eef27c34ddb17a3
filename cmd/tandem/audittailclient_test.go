package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestAuditTailNamesTheClient: tandem audit tail names a stdio agent by
// the client it declared (the test client says "e2e 1"), as the dashboard
// does, with its connection id in parentheses, in the table and in
// --json; before, it showed only "conn-…".
func TestAuditTailNamesTheClient(t *testing.T) {
	srv := startServer(t, serverOpts{})
	mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "named"}))
	want := regexp.MustCompile(`e2e 1 \(conn-[0-9a-f]{32}\)`)
	tests := []struct {
		name string
		args []string
	}{
		{"table", nil},
		{"json", []string{"--json"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, append([]string{"audit", "tail", "--data-dir", srv.dataDir, "--session", "named"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "json" {
				for line := range strings.Lines(out) {
					var r struct{ Actor, Event string }
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatal(err)
					}
					if !want.MatchString(r.Actor) {
						t.Errorf("the %s record's actor is %q, want %s", r.Event, r.Actor, want)
					}
				}
				return
			}
			if !want.MatchString(out) || strings.Contains(out, "  conn-") {
				t.Errorf("audit tail does not name the client as %s:\n%s", want, out)
			}
		})
	}
}
