package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// checkRef is Check as it was before it read a line in one pass
// (json.Valid, then json.Unmarshal into a map): the reference that
// FuzzCheck holds Check to, reply for reply.
func checkRef(line []byte) []byte {
	if depth(line) > MaxDepth {
		return errorReply(nil, codeParse, fmt.Sprintf("Parse error: JSON nested deeper than %d levels", MaxDepth))
	}
	if !json.Valid(line) {
		return errorReply(nil, codeParse, "Parse error: the line is not JSON; send one JSON-RPC message per line")
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] != '{' {
		return errorReply(nil, codeInvalid, "Invalid Request: a message must be one JSON object (batches are not supported)")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return errorReply(nil, codeInvalid, "Invalid Request: "+err.Error())
	}
	id, hasID := m["id"]
	if hasID && !validID(id) {
		return errorReply(nil, codeInvalid, "Invalid Request: id must be a string, a number or null")
	}
	if !hasID {
		id = nil
	}
	if string(m["jsonrpc"]) != `"2.0"` {
		return errorReply(id, codeInvalid, `Invalid Request: "jsonrpc" must be "2.0"`)
	}
	method, hasMethod := m["method"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch {
	case hasMethod:
		var s string
		if json.Unmarshal(method, &s) != nil || s == "" {
			return errorReply(id, codeInvalid, `Invalid Request: "method" must be a non-empty string`)
		}
		if p, ok := m["params"]; ok {
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

// FuzzCheck: Check, which reads a line once, answers every line as the
// json.Valid and json.Unmarshal version did, byte for byte.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","method":"x","params":[1,2.5e-3,true,null]}`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-1}}`,
		`{"jsonrpc":"2.0","jsonrpc":"1.0","id":1,"method":"x"}`, `{"j\u0073onrpc":"2.0","id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":{},"method":"x"}`, ` {"jsonrpc" : "2.0" , "id" : -0.1e+5 , "method" : "a\"\\\/\b\f\n\r\t\u00e9" } `,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", "{\"a\":\"\x01\"}", `[`, `[]`, `"s"`, `01`, `1.`, `-`, `1e`, `tru`, `nul`,
		`{"a":1,}`, `{"a" 1}`, `[1,]`, `{"\ud800":1}`, `{"a":"\u12"}`, `{"a":"\x"}`,
		strings.Repeat("[", 129) + strings.Repeat("]", 129), "x" + strings.Repeat("[", 200),
		`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 127) + "1" + strings.Repeat("}", 127) + "}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if got, want := Check(line), checkRef(line); !bytes.Equal(got, want) {
			t.Fatalf("Check(%q) = %s, want %s", line, got, want)
		}
	})
}

// TestCheckLongLine: a line of tens of megabytes, as an upload's, is
// judged as before: passed whole, or refused for a byte deep inside it.
func TestCheckLongLine(t *testing.T) {
	big := strings.Repeat("QUJD", 4<<20)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + "\x01" + big + `"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + `\q"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"content":"` + big + `"},"jsonrpc":"1.0"}`,
	} {
		if got, want := Check([]byte(line)), checkRef([]byte(line)); !bytes.Equal(got, want) {
			t.Errorf("Check = %s, want %s", got, want)
		}
	}
}

// BenchmarkCheck: a 50 MiB upload's line (67 MB), judged by Check and by
// the json.Valid and json.Unmarshal version it replaced.
func BenchmarkCheck(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + strings.Repeat("QUJD", 50<<20/3) + `"}}}`)
	for _, c := range []struct {
		name  string
		check func([]byte) []byte
	}{{"one-pass", Check}, {"before", checkRef}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if c.check(line) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}
