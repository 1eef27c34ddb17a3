package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

// OpenRelay opens the FIFOs dir/in (for writing) and dir/out, dir/err (for
// reading) that the shell created and holds open read-write.
//
// The opens are non-blocking, so they cannot hang even if the shell is not
// holding a FIFO (opening "in" then fails with ENXIO), and the files stay
// non-blocking under Go's poller: Close and deadlines interrupt reads and
// writes. The shell and whatever it runs may write to dir, so each name
// must be a FIFO itself, not a symlink or a regular file: otherwise tandem
// would read or write some other file on the sandbox's behalf.
func (c *conn) OpenRelay(ctx context.Context, dir string) (*shell.Relay, error) {
	fifos := [...]struct {
		name string
		flag int
	}{{"in", os.O_WRONLY}, {"out", os.O_RDONLY}, {"err", os.O_RDONLY}}
	var files [len(fifos)]*os.File
	for i, fifo := range fifos {
		err := ctx.Err()
		if err == nil {
			files[i], err = openFIFO(filepath.Join(dir, fifo.name), fifo.flag)
		}
		if err != nil {
			for _, f := range files[:i] {
				_ = f.Close()
			}
			return nil, fmt.Errorf("local shell: open relay: %w", err)
		}
	}
	return &shell.Relay{Stage: files[0], Stdout: files[1], Stderr: files[2]}, nil
}

// openFIFO opens path non-blocking without following a final symlink and
// checks that it is a named pipe.
func openFIFO(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|unix.O_NONBLOCK|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, unix.ENXIO) {
			return nil, fmt.Errorf("open %s: no process holds it open for reading: %w", path, err)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Mode().Type() != os.ModeNamedPipe {
		err = fmt.Errorf("%s is not a FIFO (%v)", path, fi.Mode().Type())
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

var _ shell.PairOpener = (*conn)(nil)

// OpenPair opens the FIFOs dir/out.NAME and dir/err.NAME for reading, as
// OpenRelay opens out and err; NAME is a number.
func (c *conn) OpenPair(ctx context.Context, dir, name string) (io.ReadCloser, io.ReadCloser, error) {
	if _, err := strconv.Atoi(name); err != nil {
		return nil, nil, fmt.Errorf("local shell: open FIFO pair %q: not a number", name)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("local shell: open FIFO pair: %w", err)
	}
	out, err := openFIFO(filepath.Join(dir, "out."+name), os.O_RDONLY)
	if err != nil {
		return nil, nil, fmt.Errorf("local shell: open FIFO pair: %w", err)
	}
	errf, err := openFIFO(filepath.Join(dir, "err."+name), os.O_RDONLY)
	if err != nil {
		_ = out.Close()
		return nil, nil, fmt.Errorf("local shell: open FIFO pair: %w", err)
	}
	return out, errf, nil
}
