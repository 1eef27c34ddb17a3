// Package spool captures a command's output completely with bounded
// memory: the first Inline bytes of a stream stay in memory, and a stream
// that grows past them moves to a file in the spool directory. It knows
// files and byte counts only, nothing of shells, sessions or MCP.
package spool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// DefaultInline is how much of each stream a server keeps in memory: the
// whole output of most commands, so small replies never touch the disk.
const DefaultInline = 64 << 10

// Dir creates Files. A nil *Dir keeps everything in memory (tests only).
type Dir struct {
	// Path is where spilled streams are written, created 0700 on demand.
	Path string
	// Inline is how many bytes of each stream stay in memory.
	Inline int
	// MaxFile, if positive, is the most bytes one stream keeps: a
	// write past it is counted as Lost, with Err wrapping ErrLimit, so a
	// program printing without end cannot fill the disk.
	MaxFile int64

	mkdir sync.Once
	err   error
}

// ensure creates Path once.
func (d *Dir) ensure() error {
	d.mkdir.Do(func() { d.err = os.MkdirAll(d.Path, 0o700) })
	return d.err
}

// File is one captured stream. Write never fails, so capture never stops
// the shell; a disk error is kept (Err) and the bytes it cost are counted
// (Lost). Every method is safe on a nil *File, which is an empty stream.
type File struct {
	dir  *Dir
	name string

	mu      sync.Mutex
	head    []byte
	f       *os.File    // open while writing; nil after Close
	opening chan opened // the file, being created ahead of the spill
	spilled bool
	closed  bool // no more writes: a later spill keeps no descriptor
	removed bool // Remove deleted its bytes
	size    int64
	lost    int64
	err     error
}

// opened is the outcome of creating a stream's file ahead of its spill.
type opened struct {
	fd  *os.File
	err error
}

// SealedPath is where the sealed exact bytes of the stream name are
// kept (see package seal), beside its spool file. The directory is
// created if need be.
func (d *Dir) SealedPath(name string) string {
	_ = d.ensure()
	return filepath.Join(d.Path, name+".sealed")
}

// New returns an empty stream that spills to Path/name.
func (d *Dir) New(name string) *File {
	return &File{dir: d, name: name}
}

func (f *File) inline() int {
	if f.dir == nil {
		return int(^uint(0) >> 1)
	}
	return f.dir.Inline
}

// Write appends p. It always reports success.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(p)
	if f.err != nil {
		f.lost += int64(n)
		return n, nil
	}
	if f.dir != nil && f.dir.MaxFile > 0 && f.size+int64(len(p)) > f.dir.MaxFile {
		keep := max(f.dir.MaxFile-f.size, 0)
		f.lost = int64(len(p)) - keep
		p = p[:keep]
		f.err = fmt.Errorf("spool %s: %w (%d bytes)", f.name, ErrLimit, f.dir.MaxFile)
		f.writeLocked(p)
		return n, nil
	}
	f.writeLocked(p)
	return n, nil
}

// writeLocked appends p, in memory or on disk; a failure is kept in
// f.err, and the bytes it cost in f.lost. f.mu is held.
func (f *File) writeLocked(p []byte) {
	if len(p) == 0 {
		return
	}
	if f.removed {
		f.lost += int64(len(p))
		return
	}
	if room := f.inline() - len(f.head); room > 0 && !f.spilled {
		k := min(room, len(p))
		f.head = append(f.head, p[:k]...)
		f.size += int64(k)
		p = p[k:]
		if f.opening == nil && f.dir != nil && len(f.head) >= f.inline()/2 {
			f.openAhead()
		}
	}
	if len(p) == 0 {
		return
	}
	if !f.spilled {
		if err := f.spill(); err != nil {
			f.err, f.lost = err, f.lost+int64(len(p))
			return
		}
	}
	if f.f == nil {
		f.err, f.lost = fmt.Errorf("spool %s: write after close", f.name), f.lost+int64(len(p))
		return
	}
	if _, err := f.f.Write(p); err != nil {
		f.err, f.lost = fmt.Errorf("spool %s: %w", f.name, err), f.lost+int64(len(p))
		return
	}
	f.size += int64(len(p))
}

// openAhead starts creating the stream's file once its head is half
// full: creating a file costs this disk a good part of a millisecond,
// which a large output would otherwise pay on the capture's path, with
// the shell's lock held. f.mu is held.
func (f *File) openAhead() {
	ch := make(chan opened, 1)
	f.opening = ch
	dir, path := f.dir, f.path()
	go func() {
		fd, err := create(dir, path)
		ch <- opened{fd, err}
	}()
}

// create makes the stream's file in dir, which it creates on first use.
func create(dir *Dir, path string) (*os.File, error) {
	if err := dir.ensure(); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}

// spill moves the stream to disk; f.mu is held.
func (f *File) spill() error {
	var o opened
	if f.opening != nil {
		o = <-f.opening
		f.opening = nil
	} else {
		o.fd, o.err = create(f.dir, f.path())
	}
	return f.spillTo(o)
}

// spillTo writes the head to the created file; f.mu is held. A stream
// that was already closed keeps no descriptor.
func (f *File) spillTo(o opened) error {
	fd, err := o.fd, o.err
	if err != nil {
		return fmt.Errorf("spool %s: %w", f.name, err)
	}
	if _, err := fd.Write(f.head); err != nil {
		_ = fd.Close()
		return fmt.Errorf("spool %s: %w", f.name, err)
	}
	f.spilled = true
	if f.closed {
		f.head = nil // a finished stream is read from its file
		return fd.Close()
	}
	f.f = fd
	return nil
}

// settle spills a closed stream whose file was being created ahead, once
// it exists, unless Persist did first.
func (f *File) settle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.opening != nil {
		if err := f.spill(); err != nil && f.err == nil {
			f.err = err
		}
	}
}

func (f *File) path() string { return filepath.Join(f.dir.Path, f.name) }

// Persist makes sure the stream is in its file (small streams live in
// memory until then) and returns its path. It fails only when no file
// exists; a file cut short by a failed write is returned, with Lost and
// Err saying what it misses. It is meant for after the command, off the
// reply's path; it does not fsync (the audit log, not the spool, is what
// must survive a crash).
func (f *File) Persist() (string, error) {
	if f == nil {
		return "", nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir == nil {
		return "", errors.New("spool: no directory")
	}
	if f.removed {
		return "", fmt.Errorf("spool %s: %w", f.name, ErrRemoved)
	}
	if !f.spilled {
		if f.err != nil && !errors.Is(f.err, ErrLimit) {
			return "", f.err
		}
		if err := f.spill(); err != nil {
			f.err = err
			return "", err
		}
	}
	return f.path(), nil
}

// Close ends writing and releases the file descriptor; the data stays
// readable.
func (f *File) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.opening != nil {
		// The file was created ahead for a spill that never came: the
		// stream goes in it once it exists, without holding up Close
		// (which the shell calls on the reply's path).
		select {
		case o := <-f.opening:
			f.opening = nil
			if err := f.spillTo(o); err != nil {
				f.err = err
				return err
			}
		default:
			go f.settle()
		}
	}
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}

// Size is the number of bytes captured (Lost bytes excluded).
func (f *File) Size() int64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size
}

// Head returns a copy of the first n bytes.
func (f *File) Head(n int) []byte {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n = min(n, len(f.head))
	return append([]byte(nil), f.head[:n]...)
}

// Spilled reports whether the stream is on disk.
func (f *File) Spilled() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spilled
}

// Err is the first disk error, if any; Lost says how many bytes it cost.
func (f *File) Err() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Lost is the number of bytes dropped because of Err.
func (f *File) Lost() int64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}

// ReadAt reads captured bytes at off, from memory or disk.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if f == nil {
		return 0, io.EOF
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed {
		return 0, fmt.Errorf("spool %s: %w", f.name, ErrRemoved)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	if !f.spilled {
		n := copy(p, f.head[off:])
		if n < len(p) {
			return n, io.EOF
		}
		return n, nil
	}
	p = p[:min(int64(len(p)), f.size-off)]
	if f.f != nil {
		return f.f.ReadAt(p, off)
	}
	fd, err := os.Open(f.path())
	if err != nil {
		return 0, fmt.Errorf("spool %s: %w", f.name, err)
	}
	defer fd.Close()
	return fd.ReadAt(p, off)
}

// Bytes returns the whole stream. Use it only where the size is known to
// be small (tests, or after checking Size).
func (f *File) Bytes() []byte {
	n := f.Size()
	b := make([]byte, n)
	m, _ := f.ReadAt(b, 0)
	return b[:m]
}

// String is the whole stream as a string, for tests and small streams.
func (f *File) String() string { return string(f.Bytes()) }
