package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
)

// pageBytes is the size of one page of a large output resource.
const pageBytes = 4 << 20

const outputURIPrefix = "tandem://output/"

// outputs keeps outputs too big to send inline, on disk, readable as MCP
// resources by the session owner only.
type outputs struct {
	dir string
	mu  sync.Mutex
	m   map[string]storedOutput // by URI
}

type storedOutput struct {
	owner session.Caller
	path  string
	size  int64
}

func newCommandID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "cmd_" + hex.EncodeToString(b)
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

// output renders a command's result, moving streams past the inline limit
// to resources.
func (s *Server) output(c session.Caller, sess *session.Session, id string, rec shell.Record) reply {
	r := execResult(rec)
	for _, st := range []struct {
		name string
		b    []byte
	}{{"stdout", rec.Stdout}, {"stderr", rec.Stderr}} {
		if len(st.b) <= s.deps.InlineOutputBytes {
			continue
		}
		uri, err := s.outputs.store(c, id, st.name, st.b)
		if err != nil {
			s.log.Error("spool output", "err", err)
			continue // the whole stream stays inline rather than being lost
		}
		putStream(r, st.name, st.b[:utf8Cut(st.b, s.deps.InlineOutputBytes)])
		r[st.name+"Truncated"] = true
		r[st.name+"Resource"] = reply{
			"uri": uri, "bytes": len(st.b), "pageBytes": pageBytes,
			"pages": (len(st.b) + pageBytes - 1) / pageBytes,
		}
	}
	return r
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

func (o *outputs) store(c session.Caller, id, stream string, b []byte) (string, error) {
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	p := filepath.Join(o.dir, id+"."+stream)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return "", fmt.Errorf("spool: %w", err)
	}
	uri := outputURIPrefix + id + "/" + stream
	o.mu.Lock()
	o.m[uri] = storedOutput{owner: c, path: p, size: int64(len(b))}
	o.mu.Unlock()
	return uri, nil
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
	off := int64(page) * pageBytes
	if off >= st.size && !(page == 0 && st.size == 0) {
		return nil, fmt.Errorf("page %d is past the end (%d bytes, %d pages)", page, st.size, (st.size+pageBytes-1)/pageBytes)
	}
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

func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return s.outputs.read(s.caller(req.Session), req.Params.URI)
}
