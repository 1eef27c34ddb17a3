package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tandem-sh/tandem/internal/claim"
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

// FuzzInflightBody: whatever a client posts, the cancellation layer hands
// the SDK the body exactly as it came, and never panics.
func FuzzInflightBody(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_exec","arguments":{}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"7"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"id":null,"method":"tools/call"}`, `{"ID":1,"Method":"tools/call"}`, ``, `{`, "\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	c := &claim.Claims{Tenant: "t", Actor: "a", SID: "s"}
	verify := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: "t/a/s", Expiration: time.Now().Add(time.Hour), Extra: map[string]any{claimsKey: c}}, nil
	}
	var got []byte
	h := auth.RequireBearerToken(verify, nil)(newInflight().wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
	})))
	f.Fuzz(func(t *testing.T, body []byte) {
		got = nil
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer x")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if !bytes.Equal(got, body) {
			t.Fatalf("the SDK would read %q, the client sent %q", got, body)
		}
	})
}
