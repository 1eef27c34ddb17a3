package session

import (
	"context"
	"fmt"
	"sync"

	"github.com/tandem-sh/tandem/internal/transfer"
)

// sessionFiles is a session's file channel, opened on first use.
type sessionFiles struct {
	mu     sync.Mutex
	files  transfer.Files
	closed bool
	// root is where relative paths start: a local target's workspace, or
	// the directory an SSH shell started in.
	root string
}

// Files returns the session's files (uploads and downloads, package
// transfer), rooted at its workspace: a local target's workspace, or the
// directory the shell started in over SSH. The channel is opened on the
// first call and closed when the session ends; the caller must not Close
// it. It fails wrapping transfer.ErrUnavailable when the session cannot
// serve files, or the error of an ended session.
func (s *Session) Files(ctx context.Context) (transfer.Files, error) {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, fmt.Errorf("%w: the session %q has ended", transfer.ErrUnavailable, s.Name)
	}
	if f.files != nil {
		return f.files, nil
	}
	root := f.root
	if root == "" {
		return nil, fmt.Errorf("%w: the session's workspace is unknown (the shell reported no directory)", transfer.ErrUnavailable)
	}
	stream, err := s.sh.OpenFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", transfer.ErrUnavailable, err)
	}
	files, err := transfer.Open(ctx, stream, root)
	if err != nil {
		return nil, err
	}
	f.files = files
	return files, nil
}

// Workspace is where the session's relative file paths start (see Files).
func (s *Session) Workspace() string {
	s.files.mu.Lock()
	defer s.files.mu.Unlock()
	return s.files.root
}

// closeFiles ends the file channel, if open; Files fails from then on.
func (s *Session) closeFiles() {
	f := &s.files
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.files != nil {
		_ = f.files.Close()
		f.files = nil
	}
}
