package seal_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/seal"
)

// TestRoundTrip: what is written comes back whole with the private key, in
// any pieces, and the file holds none of it in the clear.
func TestRoundTrip(t *testing.T) {
	pub, priv, err := seal.NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := seal.PublicOf(priv); err != nil || p != pub {
		t.Fatalf("PublicOf = %v, %v", p, err)
	}
	if k, err := seal.ParseKey(pub.String() + "\n"); err != nil || k != pub {
		t.Fatalf("ParseKey = %v, %v", k, err)
	}
	secret := []byte("AKIAIOSFODNN7EXAMPLE is the key\n")
	big := make([]byte, 3*seal.ChunkBytes+17)
	_, _ = rand.Read(big)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"small", secret},
		{"chunks", append(append([]byte{}, secret...), big...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.sealed")
			w := seal.Create(path, pub)
			for i := 0; i < len(tc.data); i += 1000 {
				_, _ = w.Write(tc.data[i:min(i+1000, len(tc.data))])
			}
			if err := w.Close(true); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte("AKIAIOSFODNN7EXAMPLE")) {
				t.Error("the sealed file holds the secret in the clear")
			}
			var out bytes.Buffer
			if err := seal.Open(path, pub, priv, &out); err != nil || !bytes.Equal(out.Bytes(), tc.data) {
				t.Fatalf("Open: %v; %d bytes back, want %d", err, out.Len(), len(tc.data))
			}
		})
	}
}

// TestWrongKeyAndDamage: another key, a cut file and a foreign file each
// fail with a message, and nothing is written out of a frame that does not
// open.
func TestWrongKeyAndDamage(t *testing.T) {
	pub, priv, _ := seal.NewKeys()
	otherPub, otherPriv, _ := seal.NewKeys()
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sealed")
	w := seal.Create(path, pub)
	_, _ = w.Write([]byte("secret value 123456\n"))
	if err := w.Close(true); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	cut := filepath.Join(dir, "cut.sealed")
	_ = os.WriteFile(cut, raw[:len(raw)-5], 0o600)
	foreign := filepath.Join(dir, "foreign")
	_ = os.WriteFile(foreign, []byte("hello"), 0o600)
	for _, tc := range []struct {
		name, path string
		pub, priv  seal.Key
		want       string
	}{
		{"another key", path, otherPub, otherPriv, "does not open with this key"},
		{"cut short", cut, pub, priv, "cut short"},
		{"not sealed", foreign, pub, priv, "not a sealed output file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := seal.Open(tc.path, tc.pub, tc.priv, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
				t.Errorf("Open = %v with %d bytes out; want %q", err, out.Len(), tc.want)
			}
		})
	}
}

// TestDiscard: a stream closed without keep leaves no file, nor does an
// empty one.
func TestDiscard(t *testing.T) {
	pub, _, _ := seal.NewKeys()
	dir := t.TempDir()
	w := seal.Create(filepath.Join(dir, "a.sealed"), pub)
	_, _ = w.Write(bytes.Repeat([]byte("x"), seal.ChunkBytes+1))
	_ = w.Close(false)
	e := seal.Create(filepath.Join(dir, "b.sealed"), pub)
	_ = e.Close(true)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left: %v", left)
	}
}
