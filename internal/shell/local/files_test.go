package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// TestOpenFiles: a local session's file channel reads what its shell
// wrote and writes what its shell reads, in the workspace and the run
// dir; sandboxed, the server cannot reach outside them even with the
// path check out of the way (root "/").
func TestOpenFiles(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      func(t *testing.T) *Options
		sandboxed bool
	}{
		{"sandboxed", sandboxed, true},
		{"unsandboxed", func(t *testing.T) *Options {
			return &Options{Workspace: t.TempDir(), NoSandbox: true, Env: []string{"PATH=" + os.Getenv("PATH")}}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			o := tc.opts(t)
			tm := startTerm(t, o)
			tm.send(`echo made > "$TMPDIR/tmpfile"; echo shell > made.txt; echo done-$((40+2))`)
			tm.expect(`done-42`)

			fc, ok := tm.conn.(shell.FileChannel)
			if !ok {
				t.Fatal("the local conn has no file channel")
			}
			open := func(root string) transfer.Files {
				stream, err := fc.OpenFiles(ctx)
				if err != nil {
					t.Fatal(err)
				}
				f, err := transfer.Open(ctx, stream, root)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { f.Close() })
				return f
			}
			f := open(o.Workspace)
			if c, err := f.Get(ctx, "made.txt", 0, 100); err != nil || string(c.Data) != "shell\n" {
				t.Fatalf("get made.txt: %v %q", err, c.Data)
			}
			if _, err := f.Put(ctx, "up.txt", strings.NewReader("uploaded"), transfer.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			tm.send(`cat up.txt; echo`)
			tm.expect(`uploaded`)

			all := open("/")
			runDir := tm.conn.(*conn).runDir
			if c, err := all.Get(ctx, filepath.Join(runDir, "tmp", "tmpfile"), 0, 100); err != nil || string(c.Data) != "made\n" {
				t.Errorf("get the run dir's file: %v %q", err, c.Data)
			}
			_, err := all.Get(ctx, outside, 0, 100)
			if tc.sandboxed && !errors.Is(err, transfer.ErrDenied) {
				t.Errorf("sandboxed get outside: %v, want ErrDenied", err)
			}
			if !tc.sandboxed && err != nil {
				t.Errorf("unsandboxed get outside: %v", err)
			}
		})
	}
}
