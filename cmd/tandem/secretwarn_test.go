package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestMissingSecretFileWarnsAtStart: the README's top-level
// `redact: {secretFiles: [.env]}` with an ssh target and no .env beside
// tandem.yaml is warned about at start, naming the file, and the ssh
// target still connects (a relative file is the project's, which may be
// missing); a missing absolute secret file is warned about too, and its
// target's connect fails with redaction_unavailable, not auth_failed.
func TestMissingSecretFileWarnsAtStart(t *testing.T) {
	pw := "pw-" + randomOf(t, alnum, 20)
	ps := testenv.PasswordSSHD(t, "tester", pw)
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "prod-secrets.env")
	target := func(name, extra string) string {
		return fmt.Sprintf("  - {name: %s, kind: ssh, host: %s, port: %d, user: %s, passwordFile: %s, knownHosts: %s%s}\n",
			name, ps.Host, ps.Port, ps.User, pwFile, ps.KnownHostsFile, extra)
	}
	srv := startServer(t, serverOpts{config: "targets:\n" + target("box", "") + target("strict", ", redact: {secretFiles: ["+gone+"]}") +
		"redact:\n  secretFiles: [.env]\n"})
	log := srv.log()
	for _, want := range []string{"redact: a secret file does not exist beside tandem.yaml", string(filepath.Separator) + ".env",
		"redact: a secret file does not exist: sessions of these targets will not start", gone} {
		if !strings.Contains(log, want) {
			t.Errorf("the start log does not say %q:\n%s", want, lastN(log, 3000))
		}
	}
	tests := []struct {
		target, wantErr string
	}{
		{"box", ""},
		{"strict", "redaction_unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			r := srv.call(t, "ssh_connect", map[string]any{"name": tc.target, "target": tc.target})
			if tc.wantErr == "" {
				mustOK(t, r)
				return
			}
			wantError(t, r, tc.wantErr)
			if msg := str(r["message"]); strings.Contains(msg, gone) || !strings.Contains(msg, "tandem's log says which") {
				t.Errorf("the agent's message: %q", msg)
			}
		})
	}
}
