package recording

import "io"

// NewTestWriter records to dst instead of a file, dropping events once the
// disk is limit bytes behind.
func NewTestWriter(dst io.Writer, h Header, limit int) (*Writer, error) {
	return newWriter(nopSync{dst}, h, limit)
}

type nopSync struct{ io.Writer }

func (nopSync) Sync() error { return nil }

func (n nopSync) Close() error {
	if c, ok := n.Writer.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
