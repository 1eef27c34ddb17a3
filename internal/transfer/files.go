package transfer

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
)

// Files is one session's files, as its agent and its humans see them:
// paths are relative to the workspace (absolute ones must lie in it), and
// nothing outside it is read or written. A Files is safe for concurrent
// use; Close ends its SFTP stream.
type Files interface {
	// Put writes r's bytes to path atomically: into a temporary file in
	// the same directory, renamed over the final name only once complete.
	// Missing parent directories are created. An error (the limit, ctx,
	// the stream) leaves no file under the final name and removes the
	// temporary one.
	Put(ctx context.Context, path string, r io.Reader, o PutOptions) (Result, error)
	// Open opens the regular file at path for reading.
	Open(ctx context.Context, path string) (*File, error)
	// Get reads at most max bytes of the file at path from offset off:
	// what a bounded download returns.
	Get(ctx context.Context, path string, off, max int64) (Chunk, error)
	// Resolve returns the real path (symlinks followed) that path names,
	// or an error wrapping ErrEscapes when it leads out of the workspace.
	// The file need not exist.
	Resolve(ctx context.Context, path string) (string, error)
	// Root is the workspace: the real path relative paths start from.
	Root() string
	// Err is nil while the file channel works, and says why it ended
	// once it has (the server exited, the connection dropped, Close):
	// a holder then opens a new one.
	Err() error
	// Close ends the file channel; later calls fail.
	Close() error
}

// PutOptions says how Put writes.
type PutOptions struct {
	// Mode is the file's permission bits. Zero: those of the file it
	// replaces, or 0644 for a new file.
	Mode fs.FileMode
	// Overwrite lets Put replace an existing file. False: an existing
	// file is an error wrapping ErrExists, and it is left as it was.
	Overwrite bool
	// MaxBytes bounds the content: past it Put stops copying and fails
	// with a *LimitError. Zero: no limit.
	MaxBytes int64
	// LimitName is the setting MaxBytes comes from, named in the error.
	LimitName string
}

// Result is a file as written (Put) or read in full.
type Result struct {
	// Path is the file's real path on the session's side.
	Path string
	// Bytes is its size.
	Bytes int64
	// SHA256 is the hex SHA-256 of its content.
	SHA256 string
}

// Chunk is a bounded read of one file.
type Chunk struct {
	// Path is the file's real path.
	Path string
	// Size is the file's whole size; Offset+len(Data) < Size means more.
	Size   int64
	Offset int64
	Data   []byte
}

// File is a regular file open for reading: a seekable reader with its
// size. Close it when done.
type File struct {
	// Path is the file's real path; Size its size when it was opened.
	Path    string
	Size    int64
	ModTime time.Time
	f       *sftp.File
}

// Read reads the file from its current offset.
func (f *File) Read(p []byte) (int, error) { return f.f.Read(p) }

// ReadAt reads len(p) bytes from off, several requests in flight.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// Seek sets the offset of the next Read.
func (f *File) Seek(off int64, whence int) (int64, error) { return f.f.Seek(off, whence) }

// WriteTo copies the rest of the file to w, several requests in flight.
func (f *File) WriteTo(w io.Writer) (int64, error) { return f.f.WriteTo(w) }

// Close closes the remote file.
func (f *File) Close() error { return f.f.Close() }

// copyChunk is how much Put hands the SFTP client at once: enough for
// many requests in flight.
const copyChunk = 1 << 20

// defaultMode is a new file's mode when PutOptions.Mode is zero.
const defaultMode fs.FileMode = 0o644

// Open speaks SFTP over stream (the session's file channel: an "sftp"
// subsystem channel, or a sandboxed file server's stdin and stdout) and
// returns the session's files rooted at root, an absolute path on the
// session's side: the workspace, or where the shell started. Closing the
// Files closes stream.
func Open(ctx context.Context, stream io.ReadWriteCloser, root string) (Files, error) {
	if !path.IsAbs(root) {
		_ = stream.Close()
		return nil, fmt.Errorf("transfer: root %q is not absolute", root)
	}
	type opened struct {
		c   *sftp.Client
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		c, err := sftp.NewClientPipe(stream, stream, sftp.UseConcurrentWrites(true), sftp.UseFstat(true))
		ch <- opened{c, err}
	}()
	var c *sftp.Client
	select {
	case o := <-ch:
		if o.err != nil {
			_ = stream.Close()
			return nil, fmt.Errorf("transfer: %w: start sftp: %w", ErrUnavailable, o.err)
		}
		c = o.c
	case <-ctx.Done():
		_ = stream.Close()
		return nil, fmt.Errorf("transfer: start sftp: %w", ctx.Err())
	}
	f := &files{c: c}
	go func() {
		err := c.Wait()
		if err == nil {
			err = errors.New("the file channel was closed")
		}
		f.mu.Lock()
		f.err = fmt.Errorf("transfer: %w: %w", ErrUnavailable, err)
		f.mu.Unlock()
	}()
	real, exists, _, err := f.walk(ctx, root)
	if err == nil && !exists {
		err = fmt.Errorf("%w: %s", ErrNotFound, root)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("transfer: workspace: %w", err)
	}
	f.root = real
	return f, nil
}

// files is Files over one SFTP client.
type files struct {
	c    *sftp.Client
	root string

	mu  sync.Mutex
	err error // why the channel ended, once it has
}

func (f *files) Root() string { return f.root }

func (f *files) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *files) Close() error { return f.c.Close() }

func (f *files) Put(ctx context.Context, p string, r io.Reader, o PutOptions) (res Result, err error) {
	real, exists, err := f.resolve(ctx, "upload", p)
	if err != nil {
		return Result{}, err
	}
	fail := func(err error, rule string) error { return &PathError{Op: "upload", Path: p, Rule: rule, Err: err} }
	mode := o.Mode.Perm()
	if exists {
		fi, err := f.c.Lstat(real)
		if err != nil {
			return Result{}, fail(remoteErr(err), "")
		}
		switch {
		case fi.IsDir():
			return Result{}, fail(ErrIsDir, "")
		case !fi.Mode().IsRegular():
			return Result{}, fail(ErrNotRegular, "")
		case !o.Overwrite:
			return Result{}, fail(ErrExists, "set overwrite to replace it")
		}
		if mode == 0 {
			mode = fi.Mode().Perm()
		}
	}
	if mode == 0 {
		mode = defaultMode
	}
	dir := path.Dir(real)
	if err := f.c.MkdirAll(dir); err != nil {
		return Result{}, fail(remoteErr(err), "create the parent directory")
	}
	tmp, err := tempName(dir)
	if err != nil {
		return Result{}, fail(err, "")
	}
	w, err := f.c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return Result{}, fail(remoteErr(err), "")
	}
	defer func() {
		if err != nil {
			_ = w.Close()
			_ = f.c.Remove(tmp)
		}
	}()
	n, sum, err := copyTo(ctx, w, r, o)
	if err != nil {
		return Result{}, fail(err, "")
	}
	if err := w.Chmod(mode); err != nil {
		return Result{}, fail(remoteErr(err), "set its mode")
	}
	if err := w.Close(); err != nil {
		return Result{}, fail(remoteErr(err), "")
	}
	if err := f.place(tmp, real, o.Overwrite); err != nil {
		return Result{}, fail(err, "")
	}
	return Result{Path: real, Bytes: n, SHA256: sum}, nil
}

// place moves the complete temporary file to its final name: a rename
// that replaces (posix-rename) with overwrite, else a hard link, which
// fails where a file appeared meanwhile, then the temporary name's
// removal. A server without those extensions (or a file system without
// hard links) gets SFTP's own rename, which replaces nothing on OpenSSH;
// with overwrite the old file is removed first, a moment without one.
func (f *files) place(tmp, final string, overwrite bool) error {
	if overwrite {
		err := f.c.PosixRename(tmp, final)
		if unsupported(err) {
			if rerr := f.c.Remove(final); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return remoteErr(rerr)
			}
			err = f.c.Rename(tmp, final)
		}
		return remoteErr(err)
	}
	err := f.c.Link(tmp, final)
	if unsupported(err) {
		if _, serr := f.c.Lstat(final); serr == nil {
			return ErrExists
		}
		return remoteErr(f.c.Rename(tmp, final))
	}
	if err != nil {
		if _, serr := f.c.Lstat(final); serr == nil {
			return ErrExists
		}
		return remoteErr(err)
	}
	return remoteErr(f.c.Remove(tmp))
}

// unsupported reports whether the server refused an operation it does not
// implement (an extension, or hard links on its file system).
func unsupported(err error) bool {
	var se *sftp.StatusError
	return errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxOpUnsupported
}

// copyTo copies r to w in large writes (each many requests in flight),
// hashing as it goes, and stops past o.MaxBytes or when ctx ends.
func copyTo(ctx context.Context, w io.Writer, r io.Reader, o PutOptions) (int64, string, error) {
	h := sha256.New()
	buf := make([]byte, copyChunk)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, "", err
		}
		m, rerr := fill(r, buf)
		if m > 0 {
			n += int64(m)
			if o.MaxBytes > 0 && n > o.MaxBytes {
				return n, "", &LimitError{Limit: o.MaxBytes, Name: o.LimitName}
			}
			h.Write(buf[:m])
			if _, err := w.Write(buf[:m]); err != nil {
				return n, "", remoteErr(err)
			}
		}
		switch {
		case rerr == io.EOF:
			return n, hex.EncodeToString(h.Sum(nil)), nil
		case rerr != nil:
			return n, "", fmt.Errorf("read the content: %w", rerr)
		}
	}
}

// Rel is real, a path Resolve returned, relative to root: "." for root
// itself. Policies judge this form (a rule's path glob is relative to
// the workspace).
func Rel(root, real string) string {
	if real == root {
		return "."
	}
	if rest, ok := strings.CutPrefix(real, strings.TrimSuffix(root, "/")+"/"); ok {
		return rest
	}
	return path.Clean(real)
}

// fill reads into buf until it is full, r ends (io.EOF) or r fails. Unlike
// io.ReadFull it passes r's own error on unchanged: a body cut short
// (net/http's io.ErrUnexpectedEOF) is a failure, never a normal end.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// tempName is a fresh hidden name in dir for an upload in progress.
func tempName(dir string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return path.Join(dir, ".tandem-upload-"+hex.EncodeToString(b[:])+".part"), nil
}

func (f *files) Open(ctx context.Context, p string) (*File, error) {
	real, exists, err := f.resolve(ctx, "download", p)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error { return &PathError{Op: "download", Path: p, Err: err} }
	if !exists {
		return nil, fail(ErrNotFound)
	}
	fi, err := f.c.Stat(real)
	if err != nil {
		return nil, fail(remoteErr(err))
	}
	if fi.IsDir() {
		return nil, fail(ErrIsDir)
	}
	if !fi.Mode().IsRegular() {
		return nil, fail(ErrNotRegular)
	}
	// O_NONBLOCK is not SFTP's: a FIFO swapped in after the check blocks
	// this read until the session writes to it or the stream closes.
	rf, err := f.c.Open(real)
	if err != nil {
		return nil, fail(remoteErr(err))
	}
	return &File{Path: real, Size: fi.Size(), ModTime: fi.ModTime(), f: rf}, nil
}

func (f *files) Get(ctx context.Context, p string, off, max int64) (Chunk, error) {
	if off < 0 || max < 0 {
		return Chunk{}, &PathError{Op: "download", Path: p, Err: fmt.Errorf("%w: negative offset or length", ErrBadPath)}
	}
	rf, err := f.Open(ctx, p)
	if err != nil {
		return Chunk{}, err
	}
	defer rf.Close()
	c := Chunk{Path: rf.Path, Size: rf.Size, Offset: off}
	if off >= rf.Size || max == 0 {
		return c, nil
	}
	c.Data = make([]byte, min(max, rf.Size-off))
	n, err := rf.ReadAt(c.Data, off)
	c.Data = c.Data[:n]
	if err != nil && !errors.Is(err, io.EOF) {
		return Chunk{}, &PathError{Op: "download", Path: p, Err: remoteErr(err)}
	}
	return c, ctx.Err()
}

func (f *files) Resolve(ctx context.Context, p string) (string, error) {
	real, _, err := f.resolve(ctx, "resolve", p)
	return real, err
}
