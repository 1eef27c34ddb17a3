package transfer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/transfer"
)

var self string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	abs, err := filepath.Abs(os.Args[0])
	if err != nil {
		panic(err)
	}
	self = abs
	os.Exit(m.Run())
}

// backend opens a stream to an SFTP server on the session's side.
type backend struct {
	name string
	open func(t testing.TB) io.ReadWriteCloser
}

// backends are the two real servers: OpenSSH's sftp subsystem on a
// session's connection, and the sandbox's file server confined to ws and
// runDir.
func backends(t testing.TB, ws, runDir string) []backend {
	srv := testenv.SSHD(t)
	client := dialSSH(t, srv)
	return []backend{
		{"ssh", func(t testing.TB) io.ReadWriteCloser { return sshStream(t, client) }},
		{"local", func(t testing.TB) io.ReadWriteCloser {
			p := sandbox.Policy{ReadWrite: []string{ws, runDir}, Namespace: true}
			return sandboxStream(t, p, ws)
		}},
	}
}

func dialSSH(t testing.TB, srv *testenv.SSHDServer) *ssh.Client {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(srv.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ssh.Dial("tcp", srv.Addr, &ssh.ClientConfig{
		User: srv.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(srv.HostPublicKey), Timeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type sessionStream struct {
	io.Reader
	io.WriteCloser
	s *ssh.Session
}

func (s sessionStream) Close() error { s.WriteCloser.Close(); return s.s.Close() }

func sshStream(t testing.TB, c *ssh.Client) io.ReadWriteCloser {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := s.StdinPipe()
	r, _ := s.StdoutPipe()
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	return sessionStream{r, w, s}
}

type cmdStream struct {
	io.Reader
	io.WriteCloser
	cmd *exec.Cmd
}

func (c cmdStream) Close() error { c.WriteCloser.Close(); return c.cmd.Wait() }

func sandboxStream(t testing.TB, p sandbox.Policy, dir string) io.ReadWriteCloser {
	t.Helper()
	cmd, err := sandbox.FilesCommand(self, p, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := cmd.StdinPipe()
	r, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmdStream{r, w, cmd}
}

func openFiles(t testing.TB, b backend, root string) transfer.Files {
	t.Helper()
	f, err := transfer.Open(context.Background(), b.open(t), root)
	if err != nil {
		t.Fatalf("%s: open: %v", b.name, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

// entries lists dir's names, to show that a refused upload wrote nothing
// (not even its temporary file).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws, runDir, outside := filepath.Join(base, "ws"), filepath.Join(base, "run"), filepath.Join(base, "outside")
	for _, d := range []string{ws, runDir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends(t, ws, runDir) {
		t.Run(b.name, func(t *testing.T) {
			dir := filepath.Join(ws, b.name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			f := openFiles(t, b, dir)
			if f.Root() != dir {
				t.Fatalf("root %q, want %q", f.Root(), dir)
			}
			data := make([]byte, 3<<20+17)
			rand.Read(data)

			res, err := f.Put(ctx, "sub/dir/blob.bin", bytes.NewReader(data), transfer.PutOptions{Mode: 0o600})
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(dir, "sub/dir/blob.bin")
			if res.Path != want || res.Bytes != int64(len(data)) || res.SHA256 != sum(data) {
				t.Fatalf("put = %+v, want %s, %d bytes, %s", res, want, len(data), sum(data))
			}
			got, err := os.ReadFile(want)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file on disk differs (%v)", err)
			}
			if fi, _ := os.Stat(want); fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}

			c, err := f.Get(ctx, "sub/dir/blob.bin", 5, 1000)
			if err != nil || c.Size != int64(len(data)) || !bytes.Equal(c.Data, data[5:1005]) {
				t.Fatalf("get: %v, size %d, %d bytes", err, c.Size, len(c.Data))
			}
			c, err = f.Get(ctx, want, int64(len(data))-3, 1000)
			if err != nil || !bytes.Equal(c.Data, data[len(data)-3:]) {
				t.Fatalf("get at the end: %v, %q", err, c.Data)
			}
			rf, err := f.Open(ctx, "sub/dir/blob.bin")
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			if _, err := rf.WriteTo(h); err != nil || hex.EncodeToString(h.Sum(nil)) != sum(data) {
				t.Fatalf("read whole: %v", err)
			}
			rf.Close()

			// Without overwrite the existing file stays; with it, it is
			// replaced and keeps its mode.
			_, err = f.Put(ctx, "sub/dir/blob.bin", strings.NewReader("new"), transfer.PutOptions{})
			if !errors.Is(err, transfer.ErrExists) {
				t.Fatalf("put over a file: %v, want ErrExists", err)
			}
			if _, err := f.Put(ctx, "sub/dir/blob.bin", strings.NewReader("new"), transfer.PutOptions{Overwrite: true}); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(want); string(got) != "new" {
				t.Fatalf("overwritten file holds %q", got)
			}
			if fi, _ := os.Stat(want); fi.Mode().Perm() != 0o600 {
				t.Errorf("overwritten mode %v, want 0600 kept", fi.Mode().Perm())
			}
			if ls := entries(t, filepath.Join(dir, "sub/dir")); len(ls) != 2 {
				t.Errorf("left behind: %q", ls)
			}
		})
	}
}

// TestRefused: paths out of the workspace, limits and broken uploads are
// refused with their sentinel, and nothing is written anywhere.
func TestRefused(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws, runDir, outside := filepath.Join(base, "ws"), filepath.Join(base, "run"), filepath.Join(base, "outside")
	for _, d := range []string{ws, runDir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends(t, ws, runDir) {
		t.Run(b.name, func(t *testing.T) {
			dir := filepath.Join(ws, b.name)
			for _, d := range []string{dir, filepath.Join(dir, "d")} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			links := map[string]string{"out": outside, "outfile": filepath.Join(outside, "secret"), "in": "d", "loop": "loop", "d/up": "../../.."}
			for name, target := range links {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "d", "f"), []byte("inside"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := entries(t, base)
			f := openFiles(t, b, dir)

			// Every path that escapes names a file under base, never a
			// system file: if the check failed, an upload over SSH (as
			// root) would replace it.
			tests := []struct {
				path string
				want error
			}{
				{"../../etc/passwd", transfer.ErrEscapes},
				{filepath.Join(outside, "secret"), transfer.ErrEscapes},
				{"../outside/secret", transfer.ErrEscapes},
				{"out/secret", transfer.ErrEscapes},
				{"outfile", transfer.ErrEscapes},
				{"d/up/outside/secret", transfer.ErrEscapes},
				{"in/../../../outside/secret", transfer.ErrEscapes},
				{"loop", transfer.ErrBadPath},
				{"", transfer.ErrBadPath},
				{"a\x00b", transfer.ErrBadPath},
				{".", transfer.ErrIsDir},
				{"d", transfer.ErrIsDir},
				{"d/f/x", transfer.ErrNotFound},
			}
			for _, tc := range tests {
				_, err := f.Put(ctx, tc.path, strings.NewReader("x"), transfer.PutOptions{})
				if !errors.Is(err, tc.want) {
					t.Errorf("put %q: %v, want %v", tc.path, err, tc.want)
				}
				_, err = f.Get(ctx, tc.path, 0, 10)
				if !errors.Is(err, tc.want) {
					t.Errorf("get %q: %v, want %v", tc.path, err, tc.want)
				}
			}
			var pe *transfer.PathError
			_, err := f.Get(ctx, "out/secret", 0, 10)
			if !errors.As(err, &pe) || !strings.Contains(pe.Rule, "symlink") || !strings.Contains(err.Error(), "outside the workspace") {
				t.Errorf("symlink refusal names no rule: %v", err)
			}

			// Inside links are followed.
			if c, err := f.Get(ctx, "in/f", 0, 10); err != nil || string(c.Data) != "inside" {
				t.Errorf("get in/f: %v %q", err, c.Data)
			}
			if _, err := f.Get(ctx, "missing", 0, 10); !errors.Is(err, transfer.ErrNotFound) {
				t.Errorf("get missing: %v", err)
			}
			if _, err := f.Get(ctx, "d/f", -1, 10); !errors.Is(err, transfer.ErrBadPath) {
				t.Errorf("negative offset: %v", err)
			}

			// Past the limit: nothing under the final name, no temp file.
			big := bytes.Repeat([]byte("y"), 3<<20)
			_, err = f.Put(ctx, "big", bytes.NewReader(big), transfer.PutOptions{MaxBytes: 1 << 20, LimitName: "limits.uploadBytes"})
			var le *transfer.LimitError
			if !errors.Is(err, transfer.ErrTooLarge) || !errors.As(err, &le) || !strings.Contains(err.Error(), "limits.uploadBytes") {
				t.Errorf("over the limit: %v", err)
			}
			// A reader that fails midway (an interrupted upload).
			_, err = f.Put(ctx, "broken", io.MultiReader(bytes.NewReader(big), errReader{}), transfer.PutOptions{})
			if err == nil {
				t.Error("broken upload succeeded")
			}
			// A body cut short, as net/http reports it (io.ErrUnexpectedEOF):
			// a failure, never the end of a shorter file.
			_, err = f.Put(ctx, "cut", io.MultiReader(bytes.NewReader(big[:1<<20+5]), cutReader{}), transfer.PutOptions{})
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut upload: %v, want io.ErrUnexpectedEOF", err)
			}
			// A cancelled context midway.
			cctx, cancel := context.WithCancel(ctx)
			_, err = f.Put(cctx, "cancelled", io.MultiReader(bytes.NewReader(big), cancelReader{cancel}, bytes.NewReader(big)), transfer.PutOptions{})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled upload: %v", err)
			}
			if after := entries(t, base); strings.Join(after, "\n") != strings.Join(before, "\n") {
				t.Errorf("a refused upload wrote something:\nbefore %q\nafter  %q", before, after)
			}
			if got, _ := os.ReadFile(filepath.Join(outside, "secret")); string(got) != "outside" {
				t.Errorf("outside file changed: %q", got)
			}
		})
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

type cutReader struct{}

func (cutReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

type cancelReader struct{ cancel func() }

func (c cancelReader) Read([]byte) (int, error) { c.cancel(); return 0, io.EOF }

// TestSandboxRefusesOutside: the local file server cannot read or write
// outside the workspace and run dir even when the path check is not
// there to stop it (root "/" lets every path through): Landlock refuses.
func TestSandboxRefusesOutside(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	ws, runDir, outside := filepath.Join(base, "ws"), filepath.Join(base, "run"), filepath.Join(base, "outside")
	for _, d := range []string{ws, runDir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	stream := sandboxStream(t, sandbox.Policy{ReadWrite: []string{ws, runDir}, Namespace: true}, ws)
	f, err := transfer.Open(ctx, stream, "/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for _, p := range []string{secret, "/etc/hostname"} {
		if _, err := f.Get(ctx, p, 0, 100); !errors.Is(err, transfer.ErrDenied) {
			t.Errorf("get %s past the path check: %v, want the sandbox's ErrDenied", p, err)
		}
	}
	if _, err := f.Put(ctx, filepath.Join(outside, "new"), strings.NewReader("x"), transfer.PutOptions{}); !errors.Is(err, transfer.ErrDenied) {
		t.Errorf("put outside past the path check: %v, want ErrDenied", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox wrote outside: %v", err)
	}
	// The run dir (the session's TMPDIR) is the session's: allowed.
	if _, err := f.Put(ctx, filepath.Join(runDir, "tmpfile"), strings.NewReader("x"), transfer.PutOptions{}); err != nil {
		t.Errorf("put in the run dir: %v", err)
	}
}

// TestErr: Err is nil while the channel works and says why once its
// server is gone.
func TestErr(t *testing.T) {
	base := t.TempDir()
	p := sandbox.Policy{ReadWrite: []string{base}}
	cmd, err := sandbox.FilesCommand(self, p, base)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := cmd.StdinPipe()
	r, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	f, err := transfer.Open(context.Background(), cmdStream{r, w, cmd}, base)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Err(); err != nil {
		t.Fatalf("Err on a working channel: %v", err)
	}
	_ = cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for f.Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Err stayed nil after the server died")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !errors.Is(f.Err(), transfer.ErrUnavailable) {
		t.Errorf("Err = %v, want ErrUnavailable", f.Err())
	}
}
