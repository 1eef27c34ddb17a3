package mcp

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
)

// pageBytes is the size of one page of a large output resource.
const pageBytes = 4 << 20

const outputURIPrefix = "tandem://output/"

// outputs keeps outputs too big to send inline, on disk, readable as MCP
// resources by the session owner only.
type outputs struct {
	mu sync.Mutex
	m  map[string]storedOutput // by URI
}

type storedOutput struct {
	owner session.Caller
	path  string
	size  int64
}

// putStream sets r[name] to the stream, base64 with name+"Encoding" when
// the bytes are not UTF-8, so the agent gets them exactly.
func putStream(r reply, name string, b []byte) {
	if utf8.Valid(b) {
		r[name] = string(b)
		return
	}
	r[name] = base64.StdEncoding.EncodeToString(b)
	r[name+"Encoding"] = "base64"
}

// result renders a command's result object.
func (s *Server) result(c session.Caller, rec session.Record) reply {
	r := reply{"exitCode": exitCode(rec), "durationMs": rec.Duration.Milliseconds(), "cwd": rec.Cwd}
	s.stream(r, c, rec.ID, "stdout", rec.Stdout)
	s.stream(r, c, rec.ID, "stderr", rec.Stderr)
	return r
}

// stream puts one stream into r: inline up to the limit, else the head
// inline plus name+"Resource" from which the caller can read all of it.
//
// If tandem could not keep every byte (a full disk), name+"Error" says how
// many bytes are missing: what the reply and the resource hold is the
// output up to the failure.
// capture is what stream needs of one captured output stream (a spool
// file): its size, its first bytes, a path to serve the rest from, and
// what was lost writing it.
type capture interface {
	Size() int64
	Head(n int) []byte
	Persist() (string, error)
	Lost() int64
	Err() error
}

func (s *Server) stream(r reply, c session.Caller, id, name string, f capture) {
	if lost := f.Lost(); lost > 0 {
		s.log.Error("output lost", "command", id, "stream", name, "bytes", lost, "err", f.Err())
		r[name+"Error"] = fmt.Sprintf("%d bytes of %s after the first %d were lost: %v. Free space under tandem's data directory and run the command again.", lost, name, f.Size(), f.Err())
	}
	limit := s.deps.InlineOutputBytes
	size := f.Size()
	if size <= int64(limit) {
		putStream(r, name, f.Head(limit))
		return
	}
	head := f.Head(limit)
	putStream(r, name, head[:utf8Cut(head, limit)])
	r[name+"Truncated"] = true
	path, err := f.Persist()
	if err != nil {
		s.log.Error("spool output", "command", id, "err", err)
		if _, said := r[name+"Error"]; !said {
			r[name+"Error"] = "the full output could not be kept: " + err.Error()
		}
		return
	}
	uri := s.outputs.add(c, id, name, path, size)
	r[name+"Resource"] = reply{
		"uri": uri, "bytes": size, "pageBytes": pageBytes,
		"pages": (size + pageBytes - 1) / pageBytes,
	}
}

func (o *outputs) add(c session.Caller, id, stream, path string, size int64) string {
	uri := outputURIPrefix + id + "/" + stream
	o.mu.Lock()
	o.m[uri] = storedOutput{owner: c, path: path, size: size}
	o.mu.Unlock()
	return uri
}

// read serves one page of a stored output to its owner.
func (o *outputs) read(c session.Caller, rawURI string) (*mcp.ReadResourceResult, error) {
	u, err := url.Parse(rawURI)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(rawURI)
	}
	page := 0
	if p := u.Query().Get("page"); p != "" {
		if page, err = strconv.Atoi(p); err != nil || page < 0 {
			return nil, fmt.Errorf("page %q is not a page number", p)
		}
	}
	base := strings.SplitN(rawURI, "?", 2)[0]
	o.mu.Lock()
	st, found := o.m[base]
	o.mu.Unlock()
	if !found || st.owner != c {
		return nil, mcp.ResourceNotFoundError(rawURI)
	}
	f, err := os.Open(st.path)
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	defer f.Close()
	// Compare page numbers before any arithmetic: page*pageBytes overflows
	// for a hostile page number.
	pages := (st.size + pageBytes - 1) / pageBytes
	if int64(page) >= max(pages, 1) {
		return nil, fmt.Errorf("page %d is past the end (%d bytes, %d pages)", page, st.size, pages)
	}
	off := int64(page) * pageBytes
	buf := make([]byte, min(int64(pageBytes), st.size-off))
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	rc := &mcp.ResourceContents{URI: rawURI, MIMEType: "text/plain"}
	if utf8.Valid(buf) {
		rc.Text = string(buf)
	} else {
		rc.MIMEType, rc.Blob = "application/octet-stream", buf
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
}

// readResource serves output pages; like every handler it never lets a
// panic end the process (and with it every session).
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (res *mcp.ReadResourceResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("resource read panicked", "uri", req.Params.URI, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("internal_error: tandem hit an internal error reading %s; nothing else was affected", req.Params.URI)
		}
	}()
	return s.outputs.read(s.caller(req.Session), req.Params.URI)
}

// utf8Cut returns the largest n <= max that does not split a UTF-8 rune.
func utf8Cut(b []byte, max int) int {
	if max >= len(b) {
		return len(b)
	}
	n := max
	for n > 0 && n > max-utf8.UTFMax && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}
