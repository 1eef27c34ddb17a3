package stdio

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// An upload's content is most of its line (67 MB for 50 MiB), and the
// SDK reads a line four times over as JSON (splitting the stream, the
// JSON-RPC message, the call's params, its _meta) before tandem's tool
// sees the arguments. The guard, which reads every line once anyway,
// hands the content of an ssh_upload call beside the SDK instead: the
// line goes on with a reference in the content's place, and the tool
// takes the content back by that reference (Guard.Content). A reference
// holds a random key of the guard's, so no content a client sends can
// pose as one.

// handOffBytes is the least content handed beside the SDK.
const handOffBytes = 1 << 20

// handOffTTL is how long a content waits for its upload to take it. The
// upload takes it as it starts; one that never starts (its arguments
// refused before it ran) leaves it to this.
const handOffTTL = time.Minute

// ErrContentDropped: the content a reference stood for was dropped, as
// more uploads arrived than the guard holds at once, or its upload did
// not start within handOffTTL.
var ErrContentDropped = errors.New("the upload's content was dropped before the upload read it (more uploads at once than tandem holds, or a call that waited over a minute to start); send it again")

// handOff holds contents taken out of lines until their tool takes them.
type handOff struct {
	mu     sync.Mutex
	prefix string
	n      uint64
	m      map[string]string
	order  []string
	held   int // bytes in m
	max    int // bytes m may hold; the oldest go first
	ttl    time.Duration
}

func newHandOff(max int) *handOff {
	var k [16]byte
	_, _ = rand.Read(k[:])
	return &handOff{prefix: "tandem-stdio-content-" + hex.EncodeToString(k[:]) + "-", m: map[string]string{}, max: max, ttl: handOffTTL}
}

func (h *handOff) put(content string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	ref := h.prefix + strconv.FormatUint(h.n, 10)
	h.m[ref] = content
	h.order = append(h.order, ref)
	h.held += len(content)
	for h.held > h.max && len(h.order) > 1 {
		old := h.order[0]
		h.order = h.order[1:]
		h.held -= len(h.m[old])
		delete(h.m, old)
	}
	time.AfterFunc(h.ttl, func() { _, _ = h.take(ref) })
	return ref
}

func (h *handOff) take(s string) (string, error) {
	if !strings.HasPrefix(s, h.prefix) {
		return s, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.m[s]
	if !ok {
		return "", ErrContentDropped
	}
	delete(h.m, s)
	h.held -= len(c)
	for i, r := range h.order {
		if r == s {
			h.order = append(h.order[:i], h.order[i+1:]...)
			break
		}
	}
	return c, nil
}

// Content returns what s stands for: the content of an upload that the
// guard handed beside the SDK, once, when s is its reference, and s
// itself otherwise. ErrContentDropped when the content is gone.
func (g *Guard) Content(s string) (string, error) { return g.hand.take(s) }

// handOffLine returns line with an ssh_upload call's content replaced by
// a reference, or line as it is. sc is Check's reading of line. Only an
// exact "tools/call" of "ssh_upload" whose arguments name "content" once,
// as a string that means exactly its bytes (no escape, valid UTF-8), is
// changed: anything else reaches the tool, and its checks, as sent.
func (g *Guard) handOffLine(line []byte, sc *lineScan) []byte {
	if len(line) < handOffBytes || string(sc.top.method) != `"tools/call"` || len(sc.top.params) == 0 || sc.top.params[0] != '{' {
		return line
	}
	var name, args [][]byte
	objMembers(sc.top.params, func(k, v []byte) {
		switch string(k) {
		case `"name"`:
			name = append(name, v)
		case `"arguments"`:
			args = append(args, v)
		}
	})
	if len(name) != 1 || string(name[0]) != `"ssh_upload"` || len(args) != 1 || args[0][0] != '{' {
		return line
	}
	var content [][]byte
	objMembers(args[0], func(k, v []byte) {
		if string(k) == `"content"` {
			content = append(content, v)
		}
	})
	if len(content) != 1 || content[0][0] != '"' {
		return line
	}
	body := content[0][1 : len(content[0])-1]
	if len(body) < handOffBytes || bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) {
		return line
	}
	ref := g.hand.put(string(body))
	start := cap(line) - cap(body) // body's offset in line: it is a slice of it
	out := make([]byte, 0, len(line)-len(body)+len(ref))
	out = append(out, line[:start]...)
	out = append(out, ref...)
	return append(out, line[start+len(body):]...)
}

// objMembers calls fn with the key token (quotes included) and the value
// of each member of obj, a valid JSON object.
func objMembers(obj []byte, fn func(key, val []byte)) {
	s := &lineScan{b: obj, each: fn}
	s.value()
}
