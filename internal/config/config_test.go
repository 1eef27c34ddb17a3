package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
)

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "targets:\n  - name: a\n    kind: local\n    workspce: x\n", "field workspce not found"},
		{"bad kind", "targets:\n  - name: a\n    kind: docker\n", "targets[0].kind: must be local or ssh"},
		{"missing workspace", "targets:\n  - name: a\n    kind: local\n", "targets[0].workspace: is required"},
		{"no such workspace", "targets:\n  - name: a\n    kind: local\n    workspace: /nope/nope\n", `targets[0].workspace: "/nope/nope" is not an existing directory`},
		{"duplicate", "targets:\n  - {name: a, kind: local, workspace: .}\n  - {name: a, kind: local, workspace: .}\n", `targets[1].name: "a" is used`},
		{"ssh port", "targets:\n  - {name: s, kind: ssh, host: h, user: u, port: 70000, keyFile: k}\n", "targets[0].port: must be 1-65535"},
		{"ssh auth", "targets:\n  - {name: s, kind: ssh, host: h, user: u}\n", "needs keyFile or useAgent"},
		{"policy", "targets:\n  - {name: s, kind: ssh, host: h, user: u, keyFile: k, hostKeyPolicy: yolo}\n", "hostKeyPolicy: must be strict or accept-new"},
		{"duration", "limits:\n  idleTimeout: soon\n", `"soon" is not a duration`},
		{"sandbox", "targets:\n  - {name: a, kind: local, workspace: ., sandbox: docker}\n", "sandbox: must be landlock or none"},
		{"not yaml", "targets: [\n", "line"},
		{"missing readOnly", "targets:\n  - {name: a, kind: local, workspace: ., readOnly: [/nope/rc]}\n", `targets[0].readOnly[0]: "/nope/rc" does not exist`},
		{"tiny inline budget", "limits:\n  inlineOutputBytes: 512\n", "limits.inlineOutputBytes: must be 0 (no bound) or at least 1024"},
		{"negative inline budget", "limits:\n  inlineOutputBytes: -1\n", "limits.inlineOutputBytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, "/home/x")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadResolvesAndDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tandem.yaml")
	y := "targets:\n  - {name: w, kind: local, workspace: ws}\n  - {name: s, kind: ssh, host: h, user: u, keyFile: ~/.ssh/id}\nlimits:\n  idleTimeout: 5m\n"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p, "/home/x")
	if err != nil {
		t.Fatal(err)
	}
	w, _ := c.Target("w")
	s, _ := c.Target("s")
	if w.Workspace != filepath.Join(dir, "ws") || w.Sandbox != "landlock" || w.Network {
		t.Errorf("local target: %+v", w)
	}
	if s.Port != 22 || s.KeyFile != "/home/x/.ssh/id" || s.HostKeyPolicy != "accept-new" {
		t.Errorf("ssh target: %+v", s)
	}
	if time.Duration(c.Limits.IdleTimeout) != 5*time.Minute || time.Duration(c.Limits.CommandTimeout) != 120*time.Second || c.Limits.InlineOutputBytes != 32<<10 {
		t.Errorf("limits: %+v", c.Limits)
	}
	if !c.AdHocAllowed(true) || c.AdHocAllowed(false) {
		t.Error("ad hoc default: allowed over stdio only")
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml"), "/"); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error should name it: %v", err)
	}
}

func TestEmptyAndDefault(t *testing.T) {
	if _, err := config.Parse(nil, "/", "/"); err != nil {
		t.Fatalf("empty config: %v", err)
	}
	d := config.Default("/work")
	if len(d.Targets) != 1 || d.Targets[0].Name != "local" || d.Targets[0].Sandbox != "landlock" {
		t.Errorf("default: %+v", d.Targets)
	}
}

// TestInlineBudget: left out means the bounded default; an explicit 0 is
// the unbounded contract (every byte inline), not the default.
func TestInlineBudget(t *testing.T) {
	tests := []struct {
		yaml string
		want int
	}{
		{"", config.DefaultInlineOutputBytes},
		{"limits:\n  idleTimeout: 1m\n", config.DefaultInlineOutputBytes},
		{"limits:\n  inlineOutputBytes: 0\n", 0},
		{"limits:\n  inlineOutputBytes: 4096\n", 4096},
	}
	for _, tc := range tests {
		c, err := config.Parse([]byte(tc.yaml), "/", "/")
		if err != nil || c.Limits.InlineOutputBytes != tc.want {
			t.Errorf("%q: %v, budget %d, want %d", tc.yaml, err, c.Limits.InlineOutputBytes, tc.want)
		}
	}
	if d := config.Default("/"); d.Limits.InlineOutputBytes != config.DefaultInlineOutputBytes {
		t.Errorf("embedded default budget %d", d.Limits.InlineOutputBytes)
	}
}
