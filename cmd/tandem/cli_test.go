package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadConfigFailsAtStart: tandem refuses to start on a bad tandem.yaml
// and says which file, which key and why.
func TestBadConfigFailsAtStart(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ yaml, want string }{
		{"targets:\n  - {name: prod, kind: ssh, host: h, user: u, keyFile: k, port: 70000}\n", "targets[0].port: must be 1-65535, got 70000"},
		{"targets:\n  - {name: w, kind: local, workspace: /no/such/dir}\n", `targets[0].workspace: "/no/such/dir" is not an existing directory`},
		{"limits:\n  idleTimout: 5m\n", "field idleTimout not found"},
	}
	for _, tc := range tests {
		p := filepath.Join(dir, "tandem.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := tandemCLI(t, "serve", "--config", p, "--data-dir", filepath.Join(dir, "state"))
		if err == nil || !strings.Contains(out, p) || !strings.Contains(out, tc.want) {
			t.Errorf("config %q: exit %v, output %q; want the file and %q", tc.yaml, err, out, tc.want)
		}
	}
	if out, err := tandemCLI(t, "version"); err != nil || !strings.HasPrefix(out, "tandem ") {
		t.Errorf("version: %v %q", err, out)
	}
}
