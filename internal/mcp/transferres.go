package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/transfer"
)

// A download too large for one reply, or binary, is a resource the agent
// reads in pages: tandem://file/{sessionId}/{downloadId}?page=N. Pages are read from
// the session's file when asked, so nothing is copied to tandem's disk; a
// file that changed since the download (size or modification time)
// refuses its pages, and the agent downloads it again for the new hash.

const fileURIPrefix = "tandem://file/"

// maxDownloads bounds the downloads kept readable; the oldest goes first.
const maxDownloads = 256

// downloads are the files named by resource links, by URI.
type downloads struct {
	mu    sync.Mutex
	m     map[string]*download
	order []string
	ahead *aheadPage // the page read ahead (readahead.go)
}

// download is one file as it was when ssh_download named it.
type download struct {
	owner   session.Caller
	sess    *session.Session
	path    string // real path on the session's side
	size    int64
	modTime time.Time
	sha256  string
	mime    string
}

// fileResource makes f readable as a resource and names it in r, with a
// link beside the reply's JSON.
func (s *Server) fileResource(ctx context.Context, c session.Caller, sess *session.Session, f *transfer.File, sum, mime string, r reply) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	// The session's id routes a read to its node in a cluster.
	uri := fileURIPrefix + sess.ID + "/" + hex.EncodeToString(b[:])
	d := &download{owner: c, sess: sess, path: f.Path, size: f.Size, modTime: f.ModTime, sha256: sum, mime: mime}
	s.downloads.add(uri, d)
	pages := max((f.Size+filePageBytes-1)/filePageBytes, 1)
	r["resource"] = reply{"uri": uri, "pages": pages, "pageBytes": filePageBytes}
	name := f.Path[strings.LastIndexByte(f.Path, '/')+1:]
	size := f.Size
	info := callFrom(ctx)
	info.content = append(info.content, &mcp.ResourceLink{URI: uri, Name: name, MIMEType: mime, Size: &size,
		Description: fmt.Sprintf("%s (%d bytes, sha256 %s) in %d page(s): add ?page=N, from 0", f.Path, f.Size, sum, pages)})
}

func (d *downloads) add(uri string, dl *download) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]*download{}
	}
	d.m[uri] = dl
	d.order = append(d.order, uri)
	for len(d.order) > maxDownloads {
		delete(d.m, d.order[0])
		d.order = d.order[1:]
	}
}

func (d *downloads) get(uri string) *download {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[uri]
}

// readFile serves one page of a downloaded file to the caller that
// downloaded it; to anyone else the resource does not exist.
func (s *Server) readFile(ctx context.Context, req *mcp.ReadResourceRequest) (res *mcp.ReadResourceResult, err error) {
	uri := req.Params.URI
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("file resource read panicked", "uri", uri, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, resourceError(jsonrpc.CodeInternalError, uri, "internal_error: tandem hit an internal error reading "+uri+"; nothing else was affected", nil)
		}
	}()
	c, _, err := s.identify(req.Session, req.Extra)
	if err != nil {
		return nil, resourceError(jsonrpc.CodeInternalError, uri, codeUnauthenticated+": "+err.Error(), nil)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	page := 0
	if p := u.Query().Get("page"); p != "" {
		if page, err = strconv.Atoi(p); err != nil || page < 0 {
			return nil, badPageError(uri, p)
		}
	}
	d := s.downloads.get(strings.SplitN(uri, "?", 2)[0])
	if d == nil || d.owner != c {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	pages := max((d.size+filePageBytes-1)/filePageBytes, 1)
	if int64(page) >= pages {
		return nil, pageError(uri, int64(page), pages, d.size)
	}
	files, err := d.sess.Files(ctx)
	if err != nil {
		return nil, resourceError(jsonrpc.CodeInvalidParams, uri, codeFilesUnavailable+": the session of this download cannot read files any more ("+err.Error()+")", nil)
	}
	f, err := files.Open(ctx, d.path)
	if err != nil {
		return nil, resourceError(jsonrpc.CodeInvalidParams, uri, codeFileNotFound+": "+err.Error(), nil)
	}
	defer f.Close()
	if f.Size != d.size || !f.ModTime.Equal(d.modTime) {
		return nil, resourceError(jsonrpc.CodeInvalidParams, uri, "file_changed: "+d.path+" changed after ssh_download named it (sha256 "+d.sha256+"); download it again", nil)
	}
	buf, ahead := s.downloads.takeAhead(ctx, d, int64(page))
	if !ahead {
		off := int64(page) * filePageBytes
		buf = make([]byte, min(filePageBytes, d.size-off))
		if _, err := io.ReadFull(io.NewSectionReader(f, off, int64(len(buf))), buf); err != nil {
			return nil, resourceError(jsonrpc.CodeInternalError, uri, "read file: "+err.Error(), nil)
		}
	}
	if next := int64(page) + 1; next < pages {
		s.downloads.readAhead(ctx, d, next)
	}
	rc := &mcp.ResourceContents{URI: uri, MIMEType: d.mime}
	if d.mime == "text/plain" && utf8.Valid(buf) {
		// Text is redacted like output, page by page.
		rc.Text = d.sess.RedactText(string(buf))
	} else {
		rc.Blob = buf
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
}

// fileTemplate is the resource template of downloaded files.
var fileTemplate = &mcp.ResourceTemplate{
	Name: "file-download", URITemplate: fileURIPrefix + "{sessionId}/{downloadId}{?page}",
	Description: "A file ssh_download named because it is binary or large: its bytes (text redacted like output) as they were when it was downloaded. Add ?page=N for page N, from 0.",
}
