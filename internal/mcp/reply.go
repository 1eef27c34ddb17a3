package mcp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/session"
)

// reply is one tool reply: a JSON object with "success" and, on failure,
// "error" (a stable code) and "message" (one sentence saying what to do).
type reply map[string]any

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
func result(r reply) *mcp.CallToolResult {
	b, err := json.Marshal(r)
	if err != nil {
		r = fail(codeInternal, "tandem could not encode its reply; please report this.", nil).reply()
		b, _ = json.Marshal(r)
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
