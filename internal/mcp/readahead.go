package mcp

import (
	"context"
	"errors"
	"io"
	"time"
)

// A client reads a downloaded file's pages one after the other, and each
// page waits for its read from the session's side (a round trip to the
// sandbox's file server, or SFTP requests) before it is encoded and sent.
// While the client takes in one page, tandem reads the next: at most one
// page ahead in the whole server (1 MiB held), for the resource read last,
// served only through readFile's own checks (the caller that downloaded
// it, the file's size and modification time unchanged).

// readAheadTimeout bounds a page read ahead that nobody asks for.
const readAheadTimeout = 30 * time.Second

// aheadPage is a page being read, or read, ahead.
type aheadPage struct {
	dl   *download
	page int64
	done chan struct{}
	buf  []byte
	err  error
}

// readAhead starts reading page of dl (whose resource was just read),
// replacing any page read ahead before.
func (d *downloads) readAhead(ctx context.Context, dl *download, page int64) {
	p := &aheadPage{dl: dl, page: page, done: make(chan struct{})}
	d.mu.Lock()
	d.ahead = p
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readAheadTimeout)
	go func() {
		defer cancel()
		defer close(p.done)
		p.buf, p.err = dl.readPage(ctx, page)
	}()
}

// takeAhead returns page of dl if it was read ahead, waiting for the read
// to finish; false when it was not (or failed: the caller reads it, and
// reports what goes wrong).
func (d *downloads) takeAhead(ctx context.Context, dl *download, page int64) ([]byte, bool) {
	d.mu.Lock()
	p := d.ahead
	if p == nil || p.dl != dl || p.page != page {
		d.mu.Unlock()
		return nil, false
	}
	d.ahead = nil
	d.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, false
	}
	return p.buf, p.err == nil
}

// errChanged: the file is not the one the download named any more.
var errChanged = errors.New("file changed")

// readPage reads one page of the file, if it is unchanged.
func (dl *download) readPage(ctx context.Context, page int64) ([]byte, error) {
	files, err := dl.sess.Files(ctx)
	if err != nil {
		return nil, err
	}
	f, err := files.Open(ctx, dl.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if f.Size != dl.size || !f.ModTime.Equal(dl.modTime) {
		return nil, errChanged
	}
	off := page * filePageBytes
	buf := make([]byte, min(filePageBytes, dl.size-off))
	if _, err := io.ReadFull(io.NewSectionReader(f, off, int64(len(buf))), buf); err != nil {
		return nil, err
	}
	return buf, nil
}
