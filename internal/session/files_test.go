package session_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// TestFiles: a session's files are rooted at its workspace, opened once,
// and closed with the session.
func TestFiles(t *testing.T) {
	m := session.NewManager(&session.Options{})
	target := localTarget(t)
	s, _, err := m.Create(context.Background(), alice, "files", target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)
	ctx := context.Background()
	f, err := s.Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Root() != s.Workspace() {
		t.Errorf("root %q, workspace %q", f.Root(), s.Workspace())
	}
	if _, err := f.Put(ctx, "x.txt", strings.NewReader("x"), transfer.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Workspace(), "x.txt")); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Files(ctx); err != nil || again != f {
		t.Errorf("second Files: %v, same %v", err, again == f)
	}
	if err := m.Disconnect(s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Files(ctx); !errors.Is(err, transfer.ErrUnavailable) {
		t.Errorf("Files after the end: %v", err)
	}
	if _, err := f.Get(ctx, "x.txt", 0, 1); err == nil {
		t.Error("the file channel outlived the session")
	}
}
