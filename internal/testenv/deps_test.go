package testenv_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDepsInstallsOnlyWhatIsMissing runs the script behind `make deps` and
// .ci/run with --print on machines made of stub commands: it must keep a
// NodeSource Node.js (whose nodejs package conflicts with Debian's npm and
// brings npm itself) and install only what each machine lacks.
func TestDepsInstallsOnlyWhatIsMissing(t *testing.T) {
	script, err := filepath.Abs("../../.ci/deps")
	if err != nil {
		t.Fatal(err)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"chromium", "asciinema", "less", "python3", "git", "curl", "make", "tmux"}
	tests := []struct {
		name     string
		commands []string // besides bash: the commands on PATH
		sshd, pg bool
		want     []string
	}{
		{"fresh Debian", nil, false, false,
			[]string{"openssh-server", "chromium", "asciinema", "less", "python3", "git", "curl", "make", "nodejs", "npm", "tmux", "python3-requests", "postgresql"}},
		{"NodeSource node brings npm", append(all, "node", "npm"), true, true, nil},
		{"Debian nodejs without npm", append(all, "node"), true, true, []string{"npm"}},
		{"everything but Node", all, true, true, []string{"nodejs", "npm"}},
		{"no sshd, no PostgreSQL", append(all, "node", "npm"), false, false, []string{"openssh-server", "postgresql"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.commands {
				if err := os.WriteFile(filepath.Join(bin, c), []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			pg := filepath.Join(dir, "pg", "*", "bin", "initdb")
			if tc.pg {
				if err := os.MkdirAll(filepath.Join(dir, "pg", "17", "bin"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "pg", "17", "bin", "initdb"), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bash, script, "--print")
			// A stub python3 imports anything: requests comes with it.
			cmd.Env = []string{"PATH=" + bin, "TANDEM_DEPS_PG_GLOB=" + pg, "TANDEM_DEPS_PYTHON=" + filepath.Join(bin, "python3")}
			if !tc.sshd {
				cmd.Env = append(cmd.Env, "TANDEM_DEPS_SSHD=/nonexistent/sshd")
			} else {
				cmd.Env = append(cmd.Env, "TANDEM_DEPS_SSHD="+bash)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := strings.Fields(string(out))
			if !slices.Equal(got, tc.want) {
				t.Errorf("would install %q, want %q", got, tc.want)
			}
		})
	}
}
