// Package mcptest is the client side of tandem's tests: it calls tools with
// the official go-sdk client and checks the wire contract of every reply
// (one JSON object, identical in structuredContent and content[0].text,
// isError exactly when success is false, a code and a message on failure).
package mcptest

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Client is one MCP client session under test.
type Client struct {
	CS *sdk.ClientSession
	// OnFail, if set, adds context (such as server logs) to failures.
	OnFail func() string
}

// Call invokes a tool and returns its checked reply object.
func (c *Client) Call(t testing.TB, tool string, args any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	res, err := c.CS.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", tool, err)
	}
	return Check(t, tool, res)
}

// Check verifies the reply contract and returns the reply object.
func Check(t testing.TB, tool string, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if len(res.Content) < 1 {
		t.Fatalf("%s: want one content item, got none", tool)
	}
	// Only a download's image or link may follow the reply's JSON.
	for _, c := range res.Content[1:] {
		switch c.(type) {
		case *sdk.ImageContent, *sdk.ResourceLink:
		default:
			t.Fatalf("%s: content after the reply is %T: only an image or a resource link may follow it", tool, c)
		}
	}
	text, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("%s: content[0] is %T, want text", tool, res.Content[0])
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("%s: content[0].text is not a JSON object: %v", tool, err)
	}
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var structured map[string]any
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("%s: structuredContent is not an object: %v", tool, err)
	}
	if !reflect.DeepEqual(fromText, structured) {
		t.Fatalf("%s: structuredContent and content[0].text differ", tool)
	}
	success, ok := structured["success"].(bool)
	if !ok {
		t.Fatalf("%s: reply has no boolean success: %s", tool, text.Text)
	}
	if res.IsError == success {
		t.Fatalf("%s: isError=%v but success=%v", tool, res.IsError, success)
	}
	if !success && (Str(structured["error"]) == "" || Str(structured["message"]) == "") {
		t.Fatalf("%s: failure without an error code and message: %s", tool, text.Text)
	}
	return structured
}

// MustOK fails the test unless the reply succeeded.
func MustOK(t testing.TB, r map[string]any) map[string]any {
	t.Helper()
	if r["success"] != true {
		t.Fatalf("want success, got %s", Short(r))
	}
	return r
}

// WantError fails the test unless the reply failed with code.
func WantError(t testing.TB, r map[string]any, code string) map[string]any {
	t.Helper()
	if r["success"] != false || r["error"] != code {
		t.Fatalf("want error %s, got %s", code, Short(r))
	}
	return r
}

// Result returns the result object of a successful command.
func Result(t testing.TB, r map[string]any) map[string]any {
	t.Helper()
	res, ok := MustOK(t, r)["result"].(map[string]any)
	if !ok {
		t.Fatalf("reply has no result object: %s", Short(r))
	}
	return res
}

// Short renders a reply for a failure message, cut to a readable size.
func Short(r map[string]any) string {
	b, _ := json.Marshal(r)
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// Str is v as a string, or "".
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// Session is a session name with its token.
type Session struct{ Name, Token string }

// AssertIsolated checks that a and b, each owning one session, see only
// their own in ssh_list_sessions, are refused on the other's session with
// its real name and token for every session tool, and that both sessions
// are unaffected afterwards.
func AssertIsolated(t testing.TB, a, b *Client, sa, sb Session) {
	t.Helper()
	pairs := []struct {
		self         *Client
		mine, theirs Session
	}{{a, sa, sb}, {b, sb, sa}}
	for _, p := range pairs {
		l := MustOK(t, p.self.Call(t, "ssh_list_sessions", map[string]any{}))
		sessions, _ := l["sessions"].([]any)
		if len(sessions) != 1 || sessions[0].(map[string]any)["name"] != p.mine.Name {
			t.Errorf("%s's list: %s", p.mine.Name, Short(l))
		}
		raw, _ := json.Marshal(l)
		if strings.Contains(string(raw), sa.Token) || strings.Contains(string(raw), sb.Token) || strings.Contains(strings.ToLower(string(raw)), "token") {
			t.Errorf("a token appears in a list: %s", raw)
		}
		for _, tool := range []string{"ssh_exec", "ssh_get_monitoring_url", "ssh_cancel", "ssh_disconnect"} {
			args := map[string]any{"sessionName": p.theirs.Name, "sessionToken": p.theirs.Token}
			if tool == "ssh_exec" {
				args["command"] = "echo intruder"
			}
			e := WantError(t, p.self.Call(t, tool, args), "invalid_session_token")
			if e["message"] != "Invalid or missing session token for session '"+p.theirs.Name+"'" {
				t.Errorf("%s on the other's session: %s", tool, Short(e))
			}
		}
	}
	for _, p := range pairs {
		r := Result(t, p.self.Call(t, "ssh_exec", map[string]any{"sessionName": p.mine.Name, "sessionToken": p.mine.Token, "command": "echo still-mine"}))
		if r["stdout"] != "still-mine\n" {
			t.Errorf("%s after the intrusion attempts: %s", p.mine.Name, Short(r))
		}
	}
}
