package claim

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// keyFile is the name of tandem's signing key inside the directory given to
// LoadOrCreateKey.
const keyFile = "claim.key"

// LoadOrCreateKey returns tandem's own Ed25519 signing key from dir/claim.key
// (PKCS#8 PEM), creating it with mode 0600 on first use. Creation is
// race-safe: the key is written to a private temporary file and linked into
// place, so a process that loses the race reads the winner's complete key.
// A key file that is a symlink, not a regular file, or open to group or
// others is refused. dir must exist.
func LoadOrCreateKey(dir string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("claim: load key: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("claim: load key: %s is not a directory", dir)
	}
	path := filepath.Join(dir, keyFile)
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err = createKey(dir, path); err == nil || errors.Is(err, fs.ErrExist) {
			key, err = readKey(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("claim: load key: %w", err)
	}
	return key, nil
}

func readKey(path string) (ed25519.PrivateKey, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink; refusing to use it as a signing key", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o; a signing key must not be open to group or others (chmod 600 it)", path, perm)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PKCS#8 \"PRIVATE KEY\" PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: key is %T, not Ed25519", path, k)
	}
	return ed, nil
}

// createKey writes a new key to a temporary file in dir and links it to
// path; the link fails with fs.ErrExist when another process got there first.
func createKey(dir, path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+keyFile+"."+hex.EncodeToString(suffix[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// KeyID names a public key in a token's "kid" header and in the JWKS: the
// unpadded base64url of the first 12 bytes of the SHA-256 of the raw key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// ParsePublicKeyPEM reads one PKIX "PUBLIC KEY" PEM block, for an external
// issuer's fixed keys in the configuration. It accepts only keys Verify can
// use: Ed25519, ECDSA P-256, and RSA of at least 2048 bits.
func ParsePublicKeyPEM(pemBytes []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("claim: parse public key: no \"PUBLIC KEY\" PEM block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("claim: parse public key: %w", err)
	}
	if algOf(k) == "" {
		return nil, fmt.Errorf("claim: parse public key: unsupported key %s", describe(k))
	}
	return k, nil
}

// algOf is the one algorithm Verify accepts for k, or "" when k is unusable
// (wrong type, wrong curve, RSA under 2048 bits). It is how a key's type is
// made to match the token's alg.
func algOf(k crypto.PublicKey) string {
	switch k := k.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return "EdDSA"
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return "ES256"
		}
	case *rsa.PublicKey:
		if k != nil && k.N != nil && k.N.BitLen() >= 2048 {
			return "RS256"
		}
	}
	return ""
}

func describe(k crypto.PublicKey) string {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA " + k.Curve.Params().Name + " (want P-256)"
	case *rsa.PublicKey:
		return fmt.Sprintf("RSA %d bits (want at least 2048)", k.N.BitLen())
	}
	return fmt.Sprintf("%T", k)
}

// LoadKeyFile returns tandem's Ed25519 signing key from a file that must
// already exist (PKCS#8 PEM, as `openssl genpkey -algorithm ed25519`
// writes), under the same checks as LoadOrCreateKey. The nodes of a cluster
// name one such file: creating it on each would give each node its own key.
func LoadKeyFile(path string) (ed25519.PrivateKey, error) {
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("claim: signing key %s does not exist: create it once (openssl genpkey -algorithm ed25519 -out %s; chmod 600 %s) and give every node the same file", path, path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("claim: load key: %w", err)
	}
	return key, nil
}
