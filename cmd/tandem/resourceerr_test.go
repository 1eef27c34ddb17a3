package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResourceReadErrors: a resources/read for a page an output does not
// have, or with a page that is not a number, answers JSON-RPC's
// invalid-params code (not 0), and its message says that pages count from
// 0 and how many the output has; an unknown output is the SDK's
// resource-not-found (invalid params too, as the MCP spec has it).
func TestResourceReadErrors(t *testing.T) {
	ws := t.TempDir()
	srv := startServer(t, serverOpts{dir: ws, config: "targets:\n  - {name: dev, kind: local, workspace: " + ws + "}\nlimits: {inlineOutputBytes: 1024}\n"})
	s := connectTo(t, srv, "dev", "dev")
	res := result(t, s.exec(t, "seq 1 3000"))
	sr, ok := res["stdoutResource"].(map[string]any)
	if !ok {
		t.Fatalf("no stdoutResource: %v", res)
	}
	uri := str(sr["uri"])
	if pages := sr["pages"]; pages != 1.0 {
		t.Fatalf("pages = %v, want 1", pages)
	}
	if _, err := s.srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri + "?page=0"}); err != nil {
		t.Fatalf("page 0: %v", err)
	}
	tests := []struct {
		name, uri string
		code      int64
		want      []string // in the message
	}{
		{"past the end", uri + "?page=1", jsonrpc.CodeInvalidParams, []string{"page 1 is past the end", "numbered from 0", "has 1 (page 0)"}},
		{"far past the end", uri + "?page=9223372036854775807", jsonrpc.CodeInvalidParams, []string{"past the end", "numbered from 0"}},
		{"negative", uri + "?page=-1", jsonrpc.CodeInvalidParams, []string{`page "-1" is not a page number`, "numbered from 0"}},
		{"not a number", uri + "?page=x", jsonrpc.CodeInvalidParams, []string{`page "x" is not a page number`}},
		{"unknown output", "tandem://output/nope/stdout", jsonrpc.CodeInvalidParams, []string{"not found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.srv.cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: tc.uri})
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("read %s: %v (%T), want a JSON-RPC error", tc.uri, err, err)
			}
			if je.Code != tc.code {
				t.Errorf("code %d, want %d: %s", je.Code, tc.code, je.Message)
			}
			for _, w := range tc.want {
				if !strings.Contains(je.Message, w) {
					t.Errorf("message %q does not say %q", je.Message, w)
				}
			}
		})
	}
}
