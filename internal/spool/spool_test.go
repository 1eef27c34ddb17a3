package spool_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-sh/tandem/internal/spool"
)

func TestSpillAndRead(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		inline int
		spill  bool
	}{
		{"fits", []string{"ab", "cd"}, 8, false},
		{"exactly", []string{"abcd", "efgh"}, 8, false},
		{"spills mid chunk", []string{"abcdef", "ghijkl"}, 8, true},
		{"spills at once", []string{"0123456789abcdef"}, 4, true},
		{"binary", []string{"\x00\xff", "\x00"}, 2, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &spool.Dir{Path: filepath.Join(t.TempDir(), "spool"), Inline: tc.inline}
			f := d.New("c1.stdout")
			var want bytes.Buffer
			for _, c := range tc.chunks {
				if n, err := f.Write([]byte(c)); n != len(c) || err != nil {
					t.Fatalf("write: %d %v", n, err)
				}
				want.WriteString(c)
			}
			if f.Spilled() != tc.spill || f.Size() != int64(want.Len()) {
				t.Errorf("spilled %v size %d", f.Spilled(), f.Size())
			}
			if got := f.Head(tc.inline); !bytes.Equal(got, want.Bytes()[:min(tc.inline, want.Len())]) {
				t.Errorf("head %q", got)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got := f.Bytes(); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("bytes %q, want %q", got, want.Bytes())
			}
			p, err := f.Persist()
			if err != nil {
				t.Fatal(err)
			}
			if onDisk, _ := os.ReadFile(p); !bytes.Equal(onDisk, want.Bytes()) {
				t.Errorf("persisted %q", onDisk)
			}
		})
	}
}

func TestDiskErrorIsKeptNotFatal(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := (&spool.Dir{Path: blocker, Inline: 4}).New("x")
	if n, err := f.Write([]byte("0123456789")); n != 10 || err != nil {
		t.Fatalf("write reported %d %v; capture must never fail the shell", n, err)
	}
	if f.Err() == nil || f.Lost() != 6 || string(f.Head(4)) != "0123" {
		t.Errorf("err %v lost %d head %q", f.Err(), f.Lost(), f.Head(4))
	}
}

// TestCutShortStillPersists: a write that fails after the spill (a full
// disk) keeps what reached the file readable, and says what is missing.
func TestCutShortStillPersists(t *testing.T) {
	f := (&spool.Dir{Path: t.TempDir(), Inline: 4}).New("cut")
	_, _ = f.Write([]byte("0123456789")) // spilled: 10 bytes on disk
	_ = f.Close()                        // the next write fails, as on a full disk
	_, _ = f.Write([]byte("abcdef"))
	p, err := f.Persist()
	if err != nil {
		t.Fatalf("persist: %v", err)
	}
	b, _ := os.ReadFile(p)
	if string(b) != "0123456789" || f.Size() != 10 || f.Lost() != 6 || f.Err() == nil {
		t.Errorf("file %q size %d lost %d err %v", b, f.Size(), f.Lost(), f.Err())
	}
}

func TestNilIsEmpty(t *testing.T) {
	var f *spool.File
	if f.Size() != 0 || f.String() != "" || f.Spilled() || f.Close() != nil {
		t.Error("nil File is not an empty stream")
	}
}

// TestSpillNeverFollowsSymlinks: a symlink planted at a spool file's name
// (by anything that could write the spool dir) is not followed: the
// target stays untouched and the stream reports the error.
func TestSpillNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "x.stdout")); err != nil {
		t.Fatal(err)
	}
	f := (&spool.Dir{Path: dir, Inline: 4}).New("x.stdout")
	_, _ = f.Write([]byte("0123456789"))
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the symlink was followed: target now %q", b)
	}
	if f.Err() == nil {
		t.Fatal("no error reported for the refused spill")
	}
}

// TestFileCreatedAhead: a stream whose head is half full has its file
// created ahead of the spill (off the capture's path). Close never waits
// for that file; the stream lands in it anyway, and neither that nor a
// Persist after Close keeps a descriptor open.
func TestFileCreatedAhead(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	for _, data := range []string{"abc", "abcd", "abcdefghij"} {
		t.Run(data, func(t *testing.T) {
			d := &spool.Dir{Path: filepath.Join(t.TempDir(), "spool"), Inline: 8}
			for i := range 20 {
				f := d.New(fmt.Sprint("s", i))
				_, _ = f.Write([]byte(data))
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				if got := f.String(); got != data {
					t.Fatalf("reads %q after Close, want %q", got, data)
				}
				p, err := f.Persist()
				if err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(p); err != nil || string(b) != data {
					t.Fatalf("file holds %q (%v), want %q", b, err, data)
				}
				if !f.Spilled() || f.String() != data || f.Err() != nil {
					t.Errorf("spilled %v, reads %q, err %v", f.Spilled(), f.String(), f.Err())
				}
			}
		})
	}
	if after := fds(); after != before {
		t.Errorf("%d descriptors open before, %d after: closed streams keep files open", before, after)
	}
	// Creating the file ahead fails where the spool cannot be made: the
	// stream stays whole in memory and says why it has no file.
	blocker := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f := (&spool.Dir{Path: blocker, Inline: 8}).New("s")
	_, _ = f.Write([]byte("abcdef"))
	_ = f.Close()
	if _, err := f.Persist(); err == nil || f.Err() == nil || f.String() != "abcdef" || f.Lost() != 0 {
		t.Errorf("persist %v, err %v, reads %q, lost %d", err, f.Err(), f.String(), f.Lost())
	}
}

// TestRetention: a stream stops at MaxFile (the rest counted as lost,
// ErrLimit); Release moves a finished stream to disk and Reopen reads it
// back; Remove deletes its file and its sealed copy, and later reads
// say it was removed.
func TestRetention(t *testing.T) {
	tests := []struct {
		name    string
		write   int
		max     int64
		keep    int64
		release bool
	}{
		{"under the limit, in memory", 100, 1 << 10, 100, false},
		{"under the limit, released", 100, 1 << 10, 100, true},
		{"past the limit", 5000, 1 << 10, 1 << 10, true},
		{"no limit", 70 << 10, 0, 70 << 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &spool.Dir{Path: filepath.Join(t.TempDir(), "spool"), Inline: 64 << 10, MaxFile: tc.max}
			f := d.New("c.out")
			data := bytes.Repeat([]byte("0123456789"), tc.write/10)
			for i := 0; i < len(data); i += 333 {
				_, _ = f.Write(data[i:min(len(data), i+333)])
			}
			_ = f.Close()
			if f.Size() != tc.keep || f.Lost() != int64(len(data))-tc.keep {
				t.Fatalf("kept %d lost %d", f.Size(), f.Lost())
			}
			if lost := f.Lost() > 0; lost != errors.Is(f.Err(), spool.ErrLimit) {
				t.Errorf("err %v with %d lost", f.Err(), f.Lost())
			}
			if tc.release {
				f.Release()
				if !f.Spilled() || f.Head(10) != nil {
					t.Errorf("released: spilled %v, head %q", f.Spilled(), f.Head(10))
				}
				if got := d.Reopen("c.out", f.Size()).Bytes(); !bytes.Equal(got, data[:tc.keep]) {
					t.Errorf("reopened: %d bytes", len(got))
				}
			}
			if !bytes.Equal(f.Bytes(), data[:tc.keep]) {
				t.Errorf("read back %d bytes", len(f.Bytes()))
			}
			if err := os.WriteFile(d.SealedPath("c.out"), []byte("sealed"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := f.Remove(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, spool.ErrRemoved) {
				t.Errorf("read after remove: %v", err)
			}
			if _, err := f.Persist(); !errors.Is(err, spool.ErrRemoved) {
				t.Errorf("persist after remove: %v", err)
			}
			if ents, _ := os.ReadDir(d.Path); len(ents) != 0 {
				t.Errorf("left behind: %v", ents)
			}
		})
	}
}
