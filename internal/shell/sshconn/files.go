package sshconn

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// OpenFiles opens the "sftp" subsystem on a new channel of the session's
// own connection (shell.FileChannel): the server runs as the login, as the
// shell does.
func (c *conn) OpenFiles(ctx context.Context) (io.ReadWriteCloser, error) {
	var st sftpStream
	s, err := c.openSession(ctx, func(s *ssh.Session) error {
		var err error
		if st.w, err = s.StdinPipe(); err != nil {
			return err
		}
		if st.r, err = s.StdoutPipe(); err != nil {
			return err
		}
		return s.RequestSubsystem("sftp")
	})
	if err != nil {
		return nil, fmt.Errorf("sshconn: sftp subsystem: %w", err)
	}
	st.s = s
	return &st, nil
}

// sftpStream is one sftp subsystem channel as a stream.
type sftpStream struct {
	s *ssh.Session
	r io.Reader
	w io.WriteCloser
}

func (st *sftpStream) Read(p []byte) (int, error)  { return st.r.Read(p) }
func (st *sftpStream) Write(p []byte) (int, error) { return st.w.Write(p) }

// Close ends the channel (the server exits on its EOF).
func (st *sftpStream) Close() error {
	err := st.w.Close()
	if cerr := st.s.Close(); cerr != nil && !errors.Is(cerr, io.EOF) {
		err = errors.Join(err, cerr)
	}
	return err
}
