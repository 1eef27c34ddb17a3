package sshconn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// TestOpenFiles: the session's connection carries an sftp channel beside
// the shell, and what it writes the shell reads; closing the conn ends it.
func TestOpenFiles(t *testing.T) {
	srv := testenv.SSHD(t)
	c, tm := startBash(t, options(srv))
	fc, ok := c.(shell.FileChannel)
	if !ok {
		t.Fatal("the ssh conn has no file channel")
	}
	ctx := context.Background()
	stream, err := fc.OpenFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := transfer.Open(ctx, stream, srv.Home)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Put(ctx, "from-sftp.txt", strings.NewReader("over sftp"), transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tm.send(t, "cat \"$HOME/from-sftp.txt\"; echo\n")
	tm.waitFor(t, `over sftp`)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Get(ctx, "from-sftp.txt", 0, 10); err == nil {
		t.Error("the file channel outlived its connection")
	}
}
