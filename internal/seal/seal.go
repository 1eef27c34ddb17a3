// Package seal keeps bytes that tandem must not be able to read back: the
// exact output of a command whose captured copy was redacted. It encrypts
// them to an operator's X25519 public key with anonymous sealed boxes
// (golang.org/x/crypto/nacl/box), so only the holder of the private key
// can open them; tandem itself holds the public key only.
//
// A sealed file is the line "tandem-sealed-v1\n" followed by frames: a
// 4-byte big-endian length and a sealed box of at most ChunkBytes of the
// stream. It knows files and keys only, nothing of shells or sessions.
package seal

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
)

// ChunkBytes is the most plaintext one frame seals.
const ChunkBytes = 64 << 10

// magic starts every sealed file.
const magic = "tandem-sealed-v1\n"

// maxFrame bounds a frame a reader accepts: a chunk and the box's overhead.
const maxFrame = ChunkBytes + box.AnonymousOverhead

// Key is an X25519 key, public or private.
type Key [32]byte

// NewKeys makes a key pair for an operator.
func NewKeys() (public, private Key, err error) {
	pub, priv, err := box.GenerateKey(rand.Reader)
	if err != nil {
		return Key{}, Key{}, fmt.Errorf("seal: new keys: %w", err)
	}
	return *pub, *priv, nil
}

// String is the key as its files hold it: base64, one line.
func (k Key) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// ParseKey reads a key as String writes it.
func ParseKey(s string) (Key, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(Key{}) {
		return Key{}, errors.New("not a key: want 32 bytes in base64 on one line (tandem audit raw-keys writes them)")
	}
	return Key(b), nil
}

// ReadKey reads a key file.
func ReadKey(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("seal: %w", err)
	}
	k, err := ParseKey(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("seal: %s: %w", path, err)
	}
	return k, nil
}

// Writer seals a stream into a file, created on the first chunk: an empty
// stream leaves no file. It never reports an error to the writer of the
// stream (capture must never stop); Err says what went wrong.
type Writer struct {
	path string
	pub  Key

	mu  sync.Mutex
	buf []byte
	f   *os.File
	err error
}

// Create returns a Writer sealing to pub into path.
func Create(path string, pub Key) *Writer {
	return &Writer{path: path, pub: pub}
}

// Write buffers p, sealing each full chunk.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for len(w.buf) >= ChunkBytes {
		w.frame(w.buf[:ChunkBytes])
		w.buf = append(w.buf[:0], w.buf[ChunkBytes:]...)
	}
	return len(p), nil
}

// frame seals one chunk into the file; w.mu is held.
func (w *Writer) frame(chunk []byte) {
	if w.err != nil || len(chunk) == 0 {
		return
	}
	if w.f == nil {
		f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			w.err = err
			return
		}
		w.f = f
		if _, err := io.WriteString(f, magic); err != nil {
			w.err = err
			return
		}
	}
	pub := [32]byte(w.pub)
	sealed, err := box.SealAnonymous(nil, chunk, &pub, rand.Reader)
	if err != nil {
		w.err = err
		return
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(sealed)))
	if _, err := w.f.Write(append(n[:], sealed...)); err != nil {
		w.err = err
	}
}

// Close seals what is buffered and closes the file. With keep false the
// stream is not wanted after all (nothing in it was redacted): its file
// is removed.
func (w *Writer) Close(keep bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if keep {
		w.frame(w.buf)
	}
	w.buf = nil
	if w.f != nil {
		if err := w.f.Close(); err != nil && w.err == nil {
			w.err = err
		}
		if !keep {
			_ = os.Remove(w.path)
		}
		w.f = nil
	}
	return w.err
}

// Err is the first error sealing met, if any.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Open writes the plaintext of the sealed file at path to out, opened with
// the private key priv and its public key pub.
func Open(path string, pub, priv Key, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head, []byte(magic)) {
		return fmt.Errorf("seal: %s is not a sealed output file", path)
	}
	p, s := [32]byte(pub), [32]byte(priv)
	for i := 0; ; i++ {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("seal: %s: frame %d: cut short", path, i)
		}
		size := binary.BigEndian.Uint32(n[:])
		if size > maxFrame || size < box.AnonymousOverhead {
			return fmt.Errorf("seal: %s: frame %d: bad size %d", path, i, size)
		}
		sealed := make([]byte, size)
		if _, err := io.ReadFull(r, sealed); err != nil {
			return fmt.Errorf("seal: %s: frame %d: cut short", path, i)
		}
		plain, ok := box.OpenAnonymous(nil, sealed, &p, &s)
		if !ok {
			return fmt.Errorf("seal: %s: frame %d does not open with this key: is it the private key for the redact.rawKey tandem used?", path, i)
		}
		if _, err := out.Write(plain); err != nil {
			return err
		}
	}
}

// PublicOf derives a private key's public key.
func PublicOf(priv Key) (Key, error) {
	pub, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		return Key{}, fmt.Errorf("seal: %w", err)
	}
	return Key(pub), nil
}
