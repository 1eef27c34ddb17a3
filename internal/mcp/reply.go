package mcp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/jsonstr"
	"github.com/tandem-sh/tandem/internal/session"
)

// reply is one tool reply: a JSON object with "success" and, on failure,
// "error" (a stable code) and "message" (one sentence saying what to do).
// Its JSON puts the short facts first and the long strings last (see
// MarshalJSON), so that whoever reads the text sees stdoutTruncated
// before the output it qualifies.
type reply map[string]any

// MarshalJSON writes r's keys in sorted order, except the keys that hold
// output (longRank), which come after all others in a fixed order. Nested
// replies are written the same way, in the same pass.
func (r reply) MarshalJSON() ([]byte, error) {
	return r.appendJSON(make([]byte, 0, r.sizeHint()))
}

// longRank orders the keys that hold long text or the objects holding it:
// 0 for every other key, which sorts first.
func longRank(key string) int {
	switch key {
	case "result":
		return 1
	case "partial":
		return 2
	case "userCommands":
		return 3
	case "stdout":
		return 4
	case "stdoutTail":
		return 5
	case "stderr":
		return 6
	case "stderrTail":
		return 7
	case "data":
		return 8
	case "matches":
		return 9
	}
	return 0
}

func (r reply) appendJSON(b []byte) ([]byte, error) {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(longRank(a), longRank(b)), strings.Compare(a, b))
	})
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendValue(b, r[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return append(b, '}'), nil
}

// appendValue appends v's JSON: replies and the common scalars directly,
// anything else as encoding/json writes it.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case reply:
		return x.appendJSON(b)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case string:
		return jsonstr.Append(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case nil:
		return append(b, "null"...), nil
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// sizeHint is about the length of r's JSON, so that it is written into
// one buffer without growing it: the strings' lengths and a little more.
func (r reply) sizeHint() int {
	n := 2
	for k, v := range r {
		n += len(k) + 16 + valueHint(v)
	}
	return n
}

func valueHint(v any) int {
	switch x := v.(type) {
	case reply:
		return x.sizeHint()
	case []any:
		n := 2
		for _, e := range x {
			n += valueHint(e) + 1
		}
		return n
	case string:
		return len(x) + len(x)/3 + 16 // what jsonstr.Append makes room for
	}
	return 0
}

func ok(fields reply) reply {
	fields["success"] = true
	return fields
}

// failure is an error that already knows its stable code and reply fields.
type failure struct {
	code   string
	msg    string
	fields reply
}

func (f *failure) Error() string { return f.code + ": " + f.msg }

func fail(code, msg string, fields reply) *failure {
	return &failure{code: code, msg: msg, fields: fields}
}

func (f *failure) reply() reply {
	r := reply{"success": false, "error": f.code, "message": f.msg}
	for k, v := range f.fields {
		r[k] = v
	}
	return r
}

// result renders a reply as structuredContent and as the text of content[0].
// It calls MarshalJSON itself: json.Marshal would check and copy the
// whole reply once more.
func result(r reply) *mcp.CallToolResult {
	b, err := r.MarshalJSON()
	if err != nil {
		r = fail(codeInternal, "tandem could not encode its reply; please report this.", nil).reply()
		b, _ = r.MarshalJSON()
	}
	success, _ := r["success"].(bool)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
		StructuredContent: json.RawMessage(b),
		IsError:           !success,
	}
}

// failure maps any error to its stable failure.
func (s *Server) failure(c session.Caller, err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return s.classify(c, err)
}

func invalidArg(field, format string, a ...any) *failure {
	return fail(codeInvalidArguments, fmt.Sprintf("Argument %q %s.", field, fmt.Sprintf(format, a...)), reply{"field": field})
}
