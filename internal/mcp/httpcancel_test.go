package mcp

import (
	"encoding/json"
	"testing"
)

// TestIDKey: a JSON-RPC id keeps its type, as JSON-RPC matches it: the
// number 7 and the string "7" are different calls.
func TestIDKey(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`7`, "n7"},
		{` 7 `, "n7"},
		{`"7"`, "s7"},
		{`"a\u0062"`, "sab"},
		{`7.5`, "n7.5"},
		{`null`, "?null"},
		{`{}`, "?{}"},
		{`[7]`, "?[7]"},
	} {
		if got := idKey(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("idKey(%s) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
