package spool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrLimit is why a stream stopped keeping bytes: it reached Dir.MaxFile.
var ErrLimit = errors.New("output past the spool's per-stream limit was not kept")

// ErrRemoved is what reading a stream returns once Remove deleted it.
var ErrRemoved = errors.New("output removed")

// Release moves a finished stream's bytes to its file and frees the
// memory that held them: a session keeps the latest commands' heads in
// memory, older ones on disk only. A stream that cannot be written
// keeps its memory; a stream still written to is left alone.
func (f *File) Release() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed || f.dir == nil || f.removed || f.size == 0 {
		return
	}
	if !f.spilled {
		if f.err != nil && !errors.Is(f.err, ErrLimit) {
			return
		}
		if err := f.spill(); err != nil {
			f.err = err
			return
		}
	}
	f.head = nil
}

// Remove deletes the stream's file and its sealed copy (SealedPath), to
// keep a session's outputs within their bound on disk. Later reads fail
// with ErrRemoved; later writes are counted as Lost.
func (f *File) Remove() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed {
		return nil
	}
	f.removed, f.head = true, nil
	var errs []error
	if f.opening != nil {
		if o := <-f.opening; o.fd != nil {
			errs = append(errs, o.fd.Close())
		}
		f.opening = nil
	}
	if f.f != nil {
		errs = append(errs, f.f.Close())
		f.f = nil
	}
	if f.dir != nil {
		for _, p := range []string{f.path(), filepath.Join(f.dir.Path, f.name+".sealed")} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("spool %s: remove: %w", f.name, err)
	}
	return nil
}

// Removed reports whether Remove deleted the stream.
func (f *File) Removed() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removed
}

// DiskBytes is what the stream takes on disk, or will once persisted:
// its bytes, and its sealed copy's where there is one.
func (f *File) DiskBytes() int64 {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed {
		return 0
	}
	n := f.size
	if f.dir != nil {
		if st, err := os.Lstat(filepath.Join(f.dir.Path, f.name+".sealed")); err == nil {
			n += st.Size()
		}
	}
	return n
}

// Name is the stream's file name in its directory.
func (f *File) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Reopen returns the finished stream name of size bytes, which a File of
// this Dir wrote (and persisted) before: its bytes are read from the
// file, none are held in memory.
func (d *Dir) Reopen(name string, size int64) *File {
	f := &File{dir: d, name: name, closed: true, size: size}
	if size > 0 {
		f.spilled = true
	}
	return f
}
