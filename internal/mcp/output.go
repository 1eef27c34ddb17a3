package mcp

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
)

// pageBytes is the size of one page of a large output resource. A page
// goes to the client as one JSON message, where a control character
// takes six bytes (\u0001): 1 MiB of them is 6 MiB, under the TypeScript
// SDK's 10 MiB limit on one stdio message, past which it drops the
// connection (a 4 MiB page of them let a program cut its agent off).
const pageBytes = 1 << 20

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

// result renders a command's result object, its output under one budget.
func (s *Server) result(c session.Caller, rec session.Record) reply {
	r := reply{"exitCode": exitCode(rec), "durationMs": rec.Duration.Milliseconds(), "cwd": rec.Cwd}
	if len(rec.Repaired) > 0 {
		r["shellRepaired"] = rec.Repaired
	}
	if len(rec.Blocked) > 0 {
		r["blocked"] = blockedList(rec)
	}
	if in := rec.Interrupt; in != nil {
		r["interruptedBy"] = in.By
		r["interruptKey"] = in.Key
		if in.Signal != "" {
			r["interruptSignal"] = in.Signal
		}
		if in.Viewer != "" {
			r["interruptViewer"] = in.Viewer
		}
	}
	p := s.plan(c)
	p.add(r, rec.ID, "stdout", rec.Stdout)
	p.add(r, rec.ID, "stderr", rec.Stderr)
	p.fill()
	addRedacted(r, rec)
	return r
}

// addRedacted says how many secrets each stream of rec had replaced.
func addRedacted(r reply, rec session.Record) {
	if n := rec.Redacted.Stdout; n > 0 {
		r["stdoutRedacted"] = n
	}
	if n := rec.Redacted.Stderr; n > 0 {
		r["stderrRedacted"] = n
	}
}

// recordWait bounds how long a reply waits for its command's row.
const recordWait = 5 * time.Second

// recorded waits, in a cluster, until the output resources a reply names
// can be found from every node: the command's row is in the shared store.
func (s *Server) recorded(ctx context.Context, id string, r reply) {
	if s.deps.CommandRecorded == nil || (r["stdoutResource"] == nil && r["stderrResource"] == nil) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	if err := s.deps.CommandRecorded(ctx, id); err != nil {
		s.log.Warn("output resource not in the shared store yet: other nodes answer its reads as unknown until it is", "command", id, "err", err)
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
			return nil, badPageError(rawURI, p)
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
	if errors.Is(err, fs.ErrNotExist) {
		return nil, resourceError(jsonrpc.CodeInvalidParams, rawURI, "output_removed: "+base+" was deleted to keep its session's outputs within limits.keptOutputBytes on disk (the oldest go first); read outputs soon after a reply names them", nil)
	}
	if err != nil {
		return nil, resourceError(jsonrpc.CodeInternalError, rawURI, "read output: "+err.Error(), nil)
	}
	defer f.Close()
	// Compare page numbers before any arithmetic: page*pageBytes overflows
	// for a hostile page number.
	pages := (st.size + pageBytes - 1) / pageBytes
	if int64(page) >= max(pages, 1) {
		return nil, pageError(rawURI, int64(page), pages, st.size)
	}
	off := int64(page) * pageBytes
	buf := make([]byte, min(int64(pageBytes), st.size-off))
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, resourceError(jsonrpc.CodeInternalError, rawURI, "read output: "+err.Error(), nil)
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
			res, err = nil, resourceError(jsonrpc.CodeInternalError, req.Params.URI, "internal_error: tandem hit an internal error reading "+req.Params.URI+"; nothing else was affected", nil)
		}
	}()
	c, _, err := s.identify(req.Session, req.Extra)
	if err != nil {
		// Over HTTP the transport refuses a request without a claim first:
		// one here is a wiring fault.
		return nil, resourceError(jsonrpc.CodeInternalError, req.Params.URI, codeUnauthenticated+": "+err.Error(), nil)
	}
	return s.outputs.read(c, req.Params.URI)
}
