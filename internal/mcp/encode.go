package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/jsonstr"
)

// encodedResult is a tool result whose JSON tandem writes once, itself.
// The go-sdk (v1.8) marshals a CallToolResult through nested MarshalJSONs,
// escaping the reply's text and compacting the same bytes several times
// over; for a large output that costs more than running the command. It
// embeds the SDK's result, so the SDK can still set what it adds after
// the handler (_meta, the result type), and MarshalJSON writes that too.
//
// Even so the SDK compacts whatever MarshalJSON returns, and again when it
// frames the message. On a connection that Run serves, MarshalJSON
// therefore hands the encoding to the connection's stash and returns a
// small placeholder, which the connection replaces with the stashed bytes
// as it writes the line: the reply is encoded once and copied once.
type encodedResult struct {
	*mcp.CallToolResult
	reply json.RawMessage // the reply object: structuredContent, and as a string content[0].text
	stash *stash          // nil: MarshalJSON returns the encoding itself
}

// encodeOnce is the receiving middleware that gives every tandem tool
// result the single encoding of encodedResult, and every resource read
// that of encodedResource. Results of any other shape pass as they are.
func (s *Server) encodeOnce(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.CallToolResult:
			if raw, ok := ownReply(r); ok {
				return &encodedResult{CallToolResult: r, reply: raw, stash: s.stashOf(req.GetSession())}, nil
			}
		case *mcp.ReadResourceResult:
			return &encodedResource{ReadResourceResult: r, stash: s.stashOf(req.GetSession())}, nil
		}
		return res, err
	}
}

// ownReply returns the reply bytes of a result built by result(): one
// text content holding exactly the structured content's JSON, nothing else
// on the content.
func ownReply(r *mcp.CallToolResult) (json.RawMessage, bool) {
	raw, ok := r.StructuredContent.(json.RawMessage)
	if !ok || len(r.Content) != 1 {
		return nil, false
	}
	t, ok := r.Content[0].(*mcp.TextContent)
	if !ok || t.Meta != nil || t.Annotations != nil || t.Text != string(raw) {
		return nil, false
	}
	return raw, true
}

// MarshalJSON writes what the SDK would write for the embedded result,
// with the reply encoded once as text and once as itself; on a connection
// with a stash, it stashes that and returns the placeholder.
func (r *encodedResult) MarshalJSON() ([]byte, error) { return r.stash.hold(r.encode()) }

// encode is the result's JSON, as the SDK would write it.
func (r *encodedResult) encode() ([]byte, error) {
	// Everything but the content, as the SDK writes it: small.
	rest := *r.CallToolResult
	rest.Content, rest.StructuredContent = nil, nil
	fields, err := otherFields(&rest, "content", "structuredContent")
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	escapes := bytes.Count(r.reply, []byte{'"'}) + bytes.Count(r.reply, []byte{'\\'})
	b := make([]byte, 0, 2*len(r.reply)+escapes+256)
	b = append(b, `{"content":[{"type":"text","text":`...)
	b, err = appendQuoted(b, r.reply)
	if err != nil {
		return nil, fmt.Errorf("encode tool result: %w", err)
	}
	b = append(b, `}],"structuredContent":`...)
	b = append(b, r.reply...)
	return appendFields(b, fields), nil
}

// otherFields is v's JSON as the SDK writes it, as fields, less those
// named: what a result carries besides its content, which is small.
func otherFields(v any, drop ...string) (map[string]json.RawMessage, error) {
	head, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(head, &fields); err != nil {
		return nil, err
	}
	for _, k := range drop {
		delete(fields, k)
	}
	return fields, nil
}

// appendFields appends fields, in key order, to an object written up to
// its last member, and closes it.
func appendFields(b []byte, fields map[string]json.RawMessage) []byte {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		key, _ := json.Marshal(k)
		b = append(b, ',')
		b = append(b, key...)
		b = append(b, ':')
		b = append(b, fields[k]...)
	}
	return append(b, '}')
}

// encodedResource is a resource read (an output page, up to 4 MiB) whose
// text tandem encodes once, itself, as encodedResult does a tool result's.
type encodedResource struct {
	*mcp.ReadResourceResult
	stash *stash // nil: MarshalJSON returns the encoding itself
}

// MarshalJSON is encodedResult's, for a resource read.
func (r *encodedResource) MarshalJSON() ([]byte, error) { return r.stash.hold(r.encode()) }

// encode writes what the SDK would, except that a text content always
// carries its text, even an empty one (the SDK leaves "text" out then,
// and a client's schema wants one of text or blob).
func (r *encodedResource) encode() ([]byte, error) {
	rest := *r.ReadResourceResult
	rest.Contents = nil
	fields, err := otherFields(&rest, "contents")
	if err != nil {
		return nil, fmt.Errorf("encode resource: %w", err)
	}
	size := 256
	for _, c := range r.Contents {
		size += len(c.Text) + len(c.Text)/4 + len(c.Blob)*4/3 + 256
	}
	b := make([]byte, 0, size)
	b = append(b, `{"contents":[`...)
	for i, c := range r.Contents {
		if i > 0 {
			b = append(b, ',')
		}
		if c.Blob != nil && c.Text != "" {
			return nil, fmt.Errorf("encode resource: %s has both text and blob", c.URI)
		}
		meta := *c
		meta.Text, meta.Blob = "", nil
		cj, err := json.Marshal(&meta)
		if err != nil {
			return nil, fmt.Errorf("encode resource: %w", err)
		}
		b = append(b, cj[:len(cj)-1]...) // the object, open
		if c.Blob != nil {
			// Straight into the message: through encoding/json a page
			// was encoded into a buffer of its own and copied.
			b = append(b, `,"blob":"`...)
			b = base64.StdEncoding.AppendEncode(b, c.Blob)
			b = append(b, '"', '}')
			continue
		}
		b = append(b, `,"text":`...)
		b = jsonstr.Append(b, c.Text)
		b = append(b, '}')
	}
	b = append(b, ']')
	return appendFields(b, fields), nil
}

// appendQuoted appends the JSON text j as a JSON string. j comes from
// encoding/json, which leaves no control character or invalid UTF-8 in
// it, so only quotes and backslashes need escaping; anything else goes
// through encoding/json.
func appendQuoted(dst, j []byte) ([]byte, error) {
	base := len(dst)
	dst = append(dst, '"')
	start := 0
	for i, c := range j {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, j[start:i]...)
			dst = append(dst, '\\', c)
			start = i + 1
		case c < 0x20:
			q, err := json.Marshal(string(j))
			return append(dst[:base], q...), err
		}
	}
	dst = append(dst, j[start:]...)
	return append(dst, '"'), nil
}

// stash holds the encodings of one connection's tool results between the
// SDK's marshalling (which gets a placeholder) and the connection's write
// of the response line (which puts the encoding in its place).
type stash struct {
	mu  sync.Mutex
	m   map[string][]byte
	key string // random per connection, so no reply can pose as a placeholder
	n   uint64
	// content, if set, gives back an upload's content that the stdio
	// guard handed beside the SDK (see contentTaker).
	content func(string) (string, error)
}

func newStash() *stash {
	var k [16]byte
	_, _ = rand.Read(k[:])
	return &stash{m: map[string][]byte{}, key: hex.EncodeToString(k[:])}
}

// placeholderPrefix starts every placeholder; the connection looks no
// further into a result that does not start with it.
const placeholderPrefix = `{"tandemEncodedResult":"`

// put keeps b and returns the placeholder that stands for it.
func (st *stash) put(b []byte) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.n++
	id := st.key + "-" + strconv.FormatUint(st.n, 10)
	st.m[id] = b
	return []byte(placeholderPrefix + id + `"}`)
}

// hold is what MarshalJSON returns for an encoding: the placeholder of b
// kept in st, or b itself when there is no stash (or an error).
func (st *stash) hold(b []byte, err error) ([]byte, error) {
	if err != nil || st == nil {
		return b, err
	}
	return st.put(b), nil
}

// take returns and forgets the encoding a placeholder stands for.
func (st *stash) take(result []byte) ([]byte, bool) {
	if !bytes.HasPrefix(result, []byte(placeholderPrefix)) || !bytes.HasSuffix(result, []byte(`"}`)) {
		return nil, false
	}
	id := string(result[len(placeholderPrefix) : len(result)-2])
	st.mu.Lock()
	defer st.mu.Unlock()
	b, ok := st.m[id]
	delete(st.m, id)
	return b, ok
}

// stashOf returns the stash of the connection a request came in on, or
// nil when Run does not serve it (an in-memory or another transport).
func (s *Server) stashOf(ss mcp.Session) *stash {
	s.mu.Lock()
	defer s.mu.Unlock()
	sss, _ := ss.(*mcp.ServerSession)
	return s.stashes[sss]
}

// Run serves one connection on t until it ends or ctx is done, as the
// SDK's Server.Run does, writing every tool result's JSON once: w must be
// the writer t writes its lines to, written a whole line per call.
func (s *Server) Run(ctx context.Context, t mcp.Transport, w io.Writer) error {
	ot := &onceTransport{inner: t, w: w, stash: newStash(), log: s.log}
	if c, ok := w.(contentTaker); ok {
		ot.stash.content = c.Content
	}
	ss, err := s.srv.Connect(ctx, ot, nil)
	if err != nil {
		return fmt.Errorf("mcp connect: %w", err)
	}
	s.mu.Lock()
	s.stashes[ss] = ot.stash
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.stashes, ss)
		s.mu.Unlock()
	}()
	closed := make(chan error, 1)
	go func() { closed <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-closed
		return ctx.Err()
	case err := <-closed:
		return err
	}
}

// onceTransport wraps a line transport so that its connection writes
// stashed tool results in place of their placeholders.
type onceTransport struct {
	inner mcp.Transport
	w     io.Writer
	stash *stash
	log   *slog.Logger
}

func (t *onceTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &onceConn{Connection: c, t: t}, nil
}

// onceConn is the connection of onceTransport: reads, closes and every
// other message go to the wrapped connection.
type onceConn struct {
	mcp.Connection
	t *onceTransport
}

func (c *onceConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil {
		return c.Connection.Write(ctx, msg)
	}
	b, ok := c.t.stash.take(resp.Result)
	if !ok {
		return c.Connection.Write(ctx, msg)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	id, err := json.Marshal(resp.ID.Raw())
	if err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	line := make([]byte, 0, len(b)+len(id)+40)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"result":`...)
	line = append(line, b...)
	line = append(line, "}\n"...)
	if _, err := c.t.w.Write(line); err != nil {
		_ = c.Close()
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}
