package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

func secret(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// TestSecretsNeverReachDisk: after connects with a password and with an
// encrypted key's passphrase (and a failed one), neither string, nor any
// session token, appears in any byte of any file tandem wrote.
func TestSecretsNeverReachDisk(t *testing.T) {
	pw := secret("pw-")
	ps := testenv.PasswordSSHD(t, "tester", pw)
	srv := startServer(t, serverOpts{})
	base := map[string]any{"host": ps.Host, "port": ps.Port, "username": ps.User}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	var tokens []string
	for _, args := range []map[string]any{
		with(map[string]any{"name": "by-password", "password": pw}),
		with(map[string]any{"name": "by-key", "privateKey": string(ps.ClientKey), "passphrase": ps.Passphrase}),
	} {
		r := mustOK(t, srv.call(t, "ssh_connect", args))
		tok := str(r["sessionToken"])
		tokens = append(tokens, tok)
		s := sess{srv, str(args["name"]), tok}
		if res := result(t, s.exec(t, "echo connected")); res["stdout"] != "connected\n" {
			t.Fatalf("%s: %v", s.name, res)
		}
		mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": tok}))
	}
	wantError(t, srv.call(t, "ssh_connect", with(map[string]any{"name": "wrong", "password": pw + "-wrong"})), "auth_failed")

	// Stop tandem cleanly so everything it buffers is on disk.
	_ = srv.cs.Close() // closes stdin and waits for the process
	if ps := srv.cmd.ProcessState; ps == nil || !ps.Success() {
		t.Fatalf("tandem did not exit cleanly: %v", ps)
	}

	needles := append([]string{pw, ps.Passphrase}, tokens...)
	files := 0
	err := filepath.WalkDir(srv.home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("a secret (%.6s…) is in %s", n, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 {
		t.Fatalf("only %d files under the data dir: the test looked in the wrong place", files)
	}
}
