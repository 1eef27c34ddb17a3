package mcp

import (
	"encoding/json"
	"testing"

	"github.com/tandem-sh/tandem/internal/redact"
)

// TestAuditHeld: a credential's secret is replaced in every string of an
// audited call's arguments, at any depth; other values keep their exact
// form (a large number too); arguments without it come back as they were.
func TestAuditHeld(t *testing.T) {
	const secret = "tok_0123456789abcdef"
	off := false
	red, err := redact.New(redact.Config{Patterns: &off}, redact.Options{Literals: []redact.Literal{{Value: secret, Kind: "credential"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, want string
	}{
		{"a command", `{"command":"curl -H 'X: ` + secret + `' a && b","sessionName":"s"}`,
			`{"command":"curl -H 'X: [REDACTED:credential]' a && b","sessionName":"s"}`},
		{"nested, beside a number", `{"input":{"keys":["a","` + secret + `"]},"n":12345678901234567890}`,
			`{"input":{"keys":["a","[REDACTED:credential]"]},"n":12345678901234567890}`},
		{"nothing to hide", `{"b":1,  "a":"x"}`, `{"b":1,  "a":"x"}`},
		{"empty", ``, ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(auditHeld(red, json.RawMessage(tc.in)))
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	if got := string(auditHeld(nil, json.RawMessage(`{"a":"`+secret+`"}`))); got != `{"a":"`+secret+`"}` {
		t.Errorf("no held redactor changed the arguments: %s", got)
	}
}
