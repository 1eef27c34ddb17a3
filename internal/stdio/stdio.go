// Package stdio guards MCP over stdio. The go-sdk ends the connection on a
// line it cannot decode, and with it every session of that client. Guard
// sits between the process's stdin/stdout and the SDK: it answers a bad
// line itself with a JSON-RPC error (-32700 parse error, -32600 invalid
// request) and passes only well-formed messages on, so one bad line costs
// one error reply and nothing else.
package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Limits on one inbound line.
const (
	// MaxLine bounds one message unless NewSized says more. A 1 MiB
	// command escaped as JSON fits with room to spare.
	MaxLine = 16 << 20
	// MaxDepth bounds nesting; no tool takes arguments nested this deep.
	MaxDepth = 128
)

// JSON-RPC error codes.
const (
	codeParse   = -32700
	codeInvalid = -32600
)

// Guard filters one stdin/stdout pair. Reader is what the SDK reads and
// Writer what it writes; both go through the guard.
type Guard struct {
	in  *bufio.Reader
	out io.Writer
	log *slog.Logger
	// maxLine bounds one inbound message (NewSized).
	maxLine int

	mu      sync.Mutex // one whole line at a time on out
	pending []byte     // the SDK's current line, until its newline

	pr *io.PipeReader
	pw *io.PipeWriter

	hand *handOff // uploads' contents handed beside the SDK (handoff.go)
}

// New starts guarding in and out. log may be nil.
func New(in io.Reader, out io.Writer, log *slog.Logger) *Guard {
	return NewSized(in, out, log, MaxLine)
}

// NewSized is New with another bound on one message (at least MaxLine):
// an upload of limits.uploadBytes is one message, base64 in JSON.
func NewSized(in io.Reader, out io.Writer, log *slog.Logger, maxLine int) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{in: bufio.NewReaderSize(in, 64<<10), out: out, log: log, maxLine: max(maxLine, MaxLine)}
	// Two uploads' contents at the longest: a client rarely sends more
	// at once, and one that does is told to send the oldest again.
	g.hand = newHandOff(2 * g.maxLine)
	g.pr, g.pw = io.Pipe()
	go g.pump()
	return g
}

// Reader returns the filtered input for the SDK's transport.
func (g *Guard) Reader() io.ReadCloser { return g.pr }

// Writer returns the output for the SDK's transport.
func (g *Guard) Writer() io.WriteCloser { return writer{g} }

// pump reads lines until stdin ends, passing good ones on.
func (g *Guard) pump() {
	for {
		line, err := g.readLine()
		if len(bytes.TrimSpace(line)) > 0 {
			if reply, sc := check(line); reply != nil {
				g.log.Warn("stdio: refused a malformed message", "reply", string(reply))
				if werr := g.writeLine(reply); werr != nil {
					_ = g.pw.CloseWithError(werr)
					return
				}
			} else if _, werr := g.pw.Write(append(g.handOffLine(line, sc), '\n')); werr != nil {
				return // the SDK stopped reading
			}
		}
		if err != nil {
			if errors.Is(err, errTooLong) {
				continue
			}
			_ = g.pw.CloseWithError(err)
			return
		}
	}
}

var errTooLong = errors.New("line too long")

// readLine returns the next line without its newline. A line over maxLine
// is answered with an error, skipped to its end, and reported as
// errTooLong.
func (g *Guard) readLine() ([]byte, error) {
	// A long line (an upload's base64, 67 MB) comes in pieces of the
	// reader's buffer: each is copied once and the line joined once at the
	// end. Appending them grew the line by a quarter at a time, copying it
	// about five times over: a quarter of tandem's CPU in an upload.
	var parts [][]byte
	total := 0
	for {
		chunk, err := g.in.ReadSlice('\n')
		if total+len(chunk) > g.maxLine {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = g.in.ReadSlice('\n')
			}
			msg := errorReply(nil, codeInvalid, fmt.Sprintf("message longer than %d bytes", g.maxLine))
			if werr := g.writeLine(msg); werr != nil {
				return nil, werr
			}
			if err != nil {
				return nil, err
			}
			return nil, errTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			parts = append(parts, bytes.Clone(chunk))
			total += len(chunk)
			continue
		}
		line := make([]byte, 0, total+len(chunk))
		for _, p := range parts {
			line = append(line, p...)
		}
		line = append(line, chunk...)
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// writeLine writes one whole line of output.
func (g *Guard) writeLine(b []byte) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, err := g.out.Write(append(b, '\n'))
	return err
}

// writer passes the SDK's output on in whole lines, so an error reply of
// the guard never lands inside one of the SDK's messages.
type writer struct{ g *Guard }

func (w writer) Write(p []byte) (int, error) {
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = append(g.pending, p...)
	i := bytes.LastIndexByte(g.pending, '\n')
	if i < 0 {
		return len(p), nil
	}
	if _, err := g.out.Write(g.pending[:i+1]); err != nil {
		return 0, err
	}
	g.pending = append(g.pending[:0], g.pending[i+1:]...)
	return len(p), nil
}

func (w writer) Close() error { return nil }

// Content is Guard.Content, for the server that holds only the writer.
func (w writer) Content(s string) (string, error) { return w.g.Content(s) }

// Check returns nil for a line that is one JSON-RPC 2.0 message, and
// otherwise the error reply to send for it. It reads the line once (see
// scanLine): an upload's line is tens of megabytes.
func Check(line []byte) []byte {
	reply, _ := check(line)
	return reply
}

// check is Check, with its reading of the line.
func check(line []byte) ([]byte, *lineScan) {
	sc := scanLine(line)
	return checkScanned(sc), sc
}

func checkScanned(sc *lineScan) []byte {
	line := sc.b
	switch {
	case sc.tooDeep, !sc.valid && depth(line) > MaxDepth:
		return errorReply(nil, codeParse, fmt.Sprintf("Parse error: JSON nested deeper than %d levels", MaxDepth))
	case !sc.valid:
		return errorReply(nil, codeParse, "Parse error: the line is not JSON; send one JSON-RPC message per line")
	case !sc.object:
		return errorReply(nil, codeInvalid, "Invalid Request: a message must be one JSON object (batches are not supported)")
	}
	m := &sc.top
	id, hasID := m.id, m.id != nil
	if hasID && !validID(id) {
		return errorReply(nil, codeInvalid, "Invalid Request: id must be a string, a number or null")
	}
	if !hasID {
		id = nil
	}
	if string(m.jsonrpc) != `"2.0"` {
		return errorReply(id, codeInvalid, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	hasMethod, hasResult, hasError := m.method != nil, m.result != nil, m.error != nil
	switch {
	case hasMethod:
		var s string
		if json.Unmarshal(m.method, &s) != nil || s == "" {
			return errorReply(id, codeInvalid, `Invalid Request: "method" must be a non-empty string`)
		}
		if p := m.params; p != nil {
			if t := bytes.TrimSpace(p); len(t) == 0 || (t[0] != '{' && t[0] != '[' && string(t) != "null") {
				return errorReply(id, codeInvalid, `Invalid Request: "params" must be an object or an array`)
			}
		}
	case hasID && hasResult != hasError:
		// A response to one of the server's own requests.
	default:
		return errorReply(id, codeInvalid, `Invalid Request: a message needs "method", or "id" with "result" or "error"`)
	}
	return nil
}

// validID reports whether raw is a JSON-RPC id: a string, number or null.
func validID(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && (t[0] == '"' || t[0] == '-' || (t[0] >= '0' && t[0] <= '9') || string(t) == "null")
}

// depth returns the deepest nesting of objects and arrays in b, stopping
// early once past MaxDepth. Strings are skipped.
func depth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			if d > deepest {
				deepest = d
				if deepest > MaxDepth {
					return deepest
				}
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// errorReply renders a JSON-RPC error response.
func errorReply(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error":   map[string]any{"code": code, "message": msg},
	})
	return b
}
