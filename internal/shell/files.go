package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrNoFiles is returned by OpenFiles when the backend cannot serve the
// session's files.
var ErrNoFiles = errors.New("this session's backend has no file channel")

// FileChannel is implemented by a Conn that can serve its session's files
// over SFTP, on the session's side and with the shell's own rights (or
// fewer): the ssh backend opens the "sftp" subsystem on the session's
// connection, the local one starts a file server under the sandbox's
// rules. Package transfer speaks SFTP over the stream.
type FileChannel interface {
	// OpenFiles starts one SFTP server and returns its stream: writes are
	// requests, reads replies. Close ends the server.
	OpenFiles(ctx context.Context) (io.ReadWriteCloser, error)
}

// OpenFiles opens an SFTP stream to the session's side (see FileChannel),
// or fails with ErrNoFiles.
func (s *Shell) OpenFiles(ctx context.Context) (io.ReadWriteCloser, error) {
	fc, ok := s.conn.(FileChannel)
	if !ok {
		return nil, ErrNoFiles
	}
	rw, err := fc.OpenFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("shell: open files: %w", err)
	}
	return rw, nil
}
