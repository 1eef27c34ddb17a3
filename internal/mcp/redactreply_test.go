package mcp

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tandem-sh/tandem/internal/redact"
)

// TestRedactReply: a secret is replaced wherever a reply carries it
// beside the output (cwd, argv, host names, held programs, messages,
// lists of sessions, values of any type), at any depth; output captured
// redacted already and what tandem made (codes, tokens, links, ids) pass
// as they are; and the reply handed in is never changed.
func TestRedactReply(t *testing.T) {
	const secret = "s3cr3t-Value-4711"
	red, err := redact.New(redact.Config{Entropy: true}, redact.Options{Literals: []redact.Literal{{Value: secret, Kind: "file"}}})
	if err != nil {
		t.Fatal(err)
	}
	const marker = "[REDACTED:file]"
	// Random-looking strings the entropy rule would take, were they not kept.
	const token = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo"
	type sandboxDesc struct {
		Workspace string   `json:"workspace"`
		Paths     []string `json:"paths"`
	}
	tests := []struct {
		name string
		in   reply
		want string // the JSON of the redacted reply
	}{
		{"cwd of a result", reply{"result": reply{"cwd": "/ws/" + secret, "exitCode": 0}},
			`{"result":{"cwd":"/ws/` + marker + `","exitCode":0}}`},
		{"blocked argv", reply{"blocked": []reply{{"argv": []string{"rm", secret}, "cwd": "/ws"}}},
			`{"blocked":[{"argv":["rm","` + marker + `"],"cwd":"/ws"}]}`},
		{"network", reply{"networkRefused": []reply{{"host": secret + ".example", "port": uint16(80), "reason": "denied: not " + secret, "decidedBy": "dashboard"}},
			"connections": []reply{{"host": secret + ".example", "port": uint16(80)}}},
			`{"connections":[{"host":"` + marker + `.example","port":80}],"networkRefused":[{"decidedBy":"dashboard","host":"` + marker + `.example","port":80,"reason":"denied: not ` + marker + `"}]}`},
		{"a held program", reply{"error": "approval_pending", "approvalId": "apr_x", "message": "the program \"curl -H 'Authorization: Bearer " + secret + "'\" waits",
			"program": reply{"command": "curl -H 'Authorization: Bearer " + secret + "'", "cwd": "/ws"}},
			`{"approvalId":"apr_x","error":"approval_pending","message":"the program \"curl -H 'Authorization: Bearer ` + marker + `'\" waits","program":{"command":"curl -H 'Authorization: Bearer ` + marker + `'","cwd":"/ws"}}`},
		{"sessions", reply{"sessions": []any{reply{"cwd": "/" + secret, "lastCommand": reply{"command": "cd " + secret, "commandId": "cmd_1"}}}},
			`{"sessions":[{"cwd":"/` + marker + `","lastCommand":{"commandId":"cmd_1","command":"cd ` + marker + `"}}]}`},
		{"a value of another type", reply{"sandbox": sandboxDesc{Workspace: "/ws/" + secret, Paths: []string{"/x"}}},
			`{"sandbox":{"paths":["/x"],"workspace":"/ws/` + marker + `"}}`},
		{"a map of any", reply{"state": map[string]any{"lastLine": "paste " + secret + "> "}},
			`{"state":{"lastLine":"paste ` + marker + `> "}}`},
		{"output and what tandem made pass", reply{"success": true, "sessionToken": token, "monitoringUrl": "http://127.0.0.1/s/" + token,
			"commandId": token, "outputId": token, "result": reply{"stdout": secret, "stdoutTail": secret, "stderr": secret, "stdoutResource": reply{"uri": "tandem://output/" + token}},
			"data": secret, "matches": []any{reply{"text": secret}}},
			`{"commandId":"` + token + `","data":"` + secret + `","matches":[{"text":"` + secret + `"}],"monitoringUrl":"http://127.0.0.1/s/` + token + `","outputId":"` + token +
				`","result":{"stderr":"` + secret + `","stdout":"` + secret + `","stdoutResource":{"uri":"tandem://output/` + token + `"},"stdoutTail":"` + secret + `"},"sessionToken":"` + token + `","success":true}`},
		{"nothing to hide", reply{"cwd": "/ws", "n": 3, "ok": true, "none": nil}, `{"cwd":"/ws","n":3,"none":null,"ok":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(redactReply(red, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("redacted:\n got %s\nwant %s", got, tt.want)
			}
			if after, _ := json.Marshal(tt.in); string(after) != string(before) {
				t.Errorf("the reply handed in changed:\n%s\nwas\n%s", after, before)
			}
			if r, _ := json.Marshal(redactReply(nil, tt.in)); string(r) != string(before) {
				t.Errorf("a nil redactor changed the reply: %s", r)
			}
		})
	}
}
