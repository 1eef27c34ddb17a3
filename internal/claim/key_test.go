package claim_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/claim"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := claim.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "claim.key"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Fatalf("key file mode %04o; want 0600", perm)
	}
	k2, err := claim.LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !k1.Equal(k2) {
		t.Fatal("second load returned another key")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("dir holds %d entries; want only claim.key", len(entries))
	}
}

// TestLoadOrCreateKeyRace checks that processes creating the key at once
// all end up with the same one.
func TestLoadOrCreateKeyRace(t *testing.T) {
	dir := t.TempDir()
	keys := make([]ed25519.PrivateKey, 16)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := claim.LoadOrCreateKey(dir)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if !k.Equal(keys[0]) {
			t.Fatal("concurrent creators got different keys")
		}
	}
}

func TestLoadOrCreateKeyRefuses(t *testing.T) {
	good := t.TempDir()
	if _, err := claim.LoadOrCreateKey(good); err != nil {
		t.Fatal(err)
	}
	goodKey := filepath.Join(good, "claim.key")

	for _, tc := range []struct {
		name, want string
		setup      func(t *testing.T, dir string)
	}{
		{"group readable", "mode", func(t *testing.T, dir string) {
			copyFile(t, goodKey, filepath.Join(dir, "claim.key"), 0o644)
		}},
		{"group writable", "mode", func(t *testing.T, dir string) {
			copyFile(t, goodKey, filepath.Join(dir, "claim.key"), 0o620)
		}},
		{"symlink", "symlink", func(t *testing.T, dir string) {
			if err := os.Symlink(goodKey, filepath.Join(dir, "claim.key")); err != nil {
				t.Fatal(err)
			}
		}},
		{"dangling symlink", "symlink", func(t *testing.T, dir string) {
			if err := os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "claim.key")); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory", "regular", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "claim.key"), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"not a key", "PEM", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "claim.key"), []byte("junk"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := claim.LoadOrCreateKey(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := claim.LoadOrCreateKey(filepath.Join(good, "missing")); err == nil {
		t.Fatal("accepted a missing directory")
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestKeyID(t *testing.T) {
	pub := ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))
	// base64url of the first 12 bytes of SHA-256 of 32 zero bytes.
	if got, want := claim.KeyID(pub), "Zmh6rfhivXdsj8GL"; got != want {
		t.Fatalf("KeyID = %q; want %q", got, want)
	}
}
