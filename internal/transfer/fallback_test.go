package transfer_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pkg/sftp"

	"github.com/tandem-sh/tandem/internal/transfer"
)

// bareCmds is an SFTP server's commands without hard links or
// posix-rename, as some servers and file systems are.
type bareCmds struct{ sftp.FileCmder }

func (b bareCmds) Filecmd(r *sftp.Request) error {
	if r.Method == "Link" {
		return sftp.ErrSSHFxOpUnsupported
	}
	return b.FileCmder.Filecmd(r)
}

func (b bareCmds) PosixRename(*sftp.Request) error { return sftp.ErrSSHFxOpUnsupported }

// TestPlaceWithoutExtensions: without hard links and posix-rename, Put
// still lands whole, refuses to replace without overwrite, and replaces
// with it.
func TestPlaceWithoutExtensions(t *testing.T) {
	ctx := context.Background()
	h := sftp.InMemHandler()
	h.FileCmd = bareCmds{h.FileCmd}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv := sftp.NewRequestServer(pipes{sr, sw}, h)
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() { _ = srv.Close() })
	f, err := transfer.Open(ctx, pipes{cr, cw}, "/")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Put(ctx, "dir/a.txt", strings.NewReader("first"), transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Put(ctx, "dir/a.txt", strings.NewReader("second"), transfer.PutOptions{}); !errors.Is(err, transfer.ErrExists) {
		t.Errorf("put over a file without overwrite: %v", err)
	}
	if c, err := f.Get(ctx, "dir/a.txt", 0, 100); err != nil || string(c.Data) != "first" {
		t.Errorf("after the refused put: %v %q", err, c.Data)
	}
	if _, err := f.Put(ctx, "dir/a.txt", strings.NewReader("second"), transfer.PutOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	if c, err := f.Get(ctx, "dir/a.txt", 0, 100); err != nil || string(c.Data) != "second" {
		t.Errorf("after the overwrite: %v %q", err, c.Data)
	}
}

type pipes struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipes) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipes) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipes) Close() error                { p.w.Close(); return p.r.Close() }
