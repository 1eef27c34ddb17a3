package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/tandem-sh/tandem/internal/sandbox"
)

// fileServer is how a local session's files are served: the sandbox's
// file server under a policy that grants the workspace and the session's
// run dir (its TMPDIR and HOME) and nothing else, not even the system
// directories the shell may read; or, for a target with sandbox: none,
// an SFTP server inside tandem.
type fileServer struct {
	self      string
	workspace string
	policy    *sandbox.Policy // nil: unsandboxed
}

// newFileServer describes the file server of the shell that runs in
// runDir, its network kept as the shell's (namespace or Landlock's TCP
// rules).
func (o *Options) newFileServer(runDir string, namespaced bool) fileServer {
	fs := fileServer{self: o.Self, workspace: o.Workspace}
	if !o.NoSandbox {
		fs.policy = &sandbox.Policy{ReadWrite: []string{o.Workspace, runDir}, Network: o.Network, Namespace: namespaced}
	}
	return fs
}

// OpenFiles starts a file server for the session (shell.FileChannel).
func (c *conn) OpenFiles(ctx context.Context) (io.ReadWriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("local shell: files: %w", os.ErrClosed)
	}
	if c.files.policy == nil {
		return inProcessSFTP(c.files.workspace)
	}
	cmd, err := sandbox.FilesCommand(c.files.self, *c.files.policy, c.files.workspace)
	if err != nil {
		return nil, fmt.Errorf("local shell: files: %w", err)
	}
	return startFileServer(cmd)
}

// startFileServer runs cmd with its standard streams piped to the
// returned stream; Close ends it.
func startFileServer(cmd *exec.Cmd) (io.ReadWriteCloser, error) {
	w, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	r, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	st := &serverStream{cmd: cmd, r: r, w: w}
	cmd.Stderr = &st.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local shell: start file server: %w", err)
	}
	return st, nil
}

// serverStream is a file server process as a stream.
type serverStream struct {
	cmd    *exec.Cmd
	r      io.Reader
	w      io.WriteCloser
	stderr boundedBuffer
	once   sync.Once
	err    error
}

func (s *serverStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		if msg := s.stderr.String(); msg != "" {
			err = fmt.Errorf("file server ended: %s: %w", msg, io.ErrUnexpectedEOF)
		}
	}
	return n, err
}

func (s *serverStream) Write(p []byte) (int, error) { return s.w.Write(p) }

// Close closes the server's stdin (it exits on EOF) and reaps it, killing
// it if it has not exited within a second.
func (s *serverStream) Close() error {
	s.once.Do(func() {
		_ = s.w.Close()
		t := time.AfterFunc(time.Second, func() { _ = s.cmd.Process.Kill() })
		werr := s.cmd.Wait()
		t.Stop()
		var ee *exec.ExitError
		if werr != nil && !errors.As(werr, &ee) {
			s.err = werr
		}
	})
	return s.err
}

// boundedBuffer keeps the first 4 KiB written to it: a server's message.
type boundedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// inProcessSFTP serves an unsandboxed session's files inside tandem, with
// tandem's rights (the target's sandbox: none says the shell has them
// too).
func inProcessSFTP(dir string) (io.ReadWriteCloser, error) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := sftp.NewServer(pipeEnd{sr, sw}, sftp.WithServerWorkingDirectory(dir))
	if err != nil {
		return nil, fmt.Errorf("local shell: files: %w", err)
	}
	go func() {
		_ = srv.Serve()
		_ = srv.Close()
		_ = sw.Close()
	}()
	return pipeEnd{cr, cw}, nil
}

// pipeEnd is one end of a pair of pipes.
type pipeEnd struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipeEnd) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipeEnd) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeEnd) Close() error                { return errors.Join(p.w.Close(), p.r.Close()) }
