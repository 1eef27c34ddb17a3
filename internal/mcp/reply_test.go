package mcp

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestReplyKeyOrder: the facts come first, sorted, and the output last,
// in a fixed order, at every level of a reply.
func TestReplyKeyOrder(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  string
	}{
		{"flat", reply{"success": true, "data": "x", "bytes": 1, "eof": true, "encoding": "base64"},
			`{"bytes":1,"encoding":"base64","eof":true,"success":true,"data":"x"}`},
		{"a result", ok(reply{"commandId": "c", "result": reply{
			"stdoutTail": "t", "stdout": "h", "stderr": "e", "stdoutBytes": int64(9), "stdoutTruncated": true,
			"stdoutResource": reply{"uri": "u", "bytes": int64(9)}, "exitCode": nil, "cwd": "/",
		}}),
			`{"commandId":"c","success":true,"result":{"cwd":"/","exitCode":null,"stdoutBytes":9,"stdoutResource":{"bytes":9,"uri":"u"},"stdoutTruncated":true,"stdout":"h","stdoutTail":"t","stderr":"e"}}`},
		{"the gate", reply{"userCommands": []any{reply{"stdout": "o", "command": "ls", "stdoutLossy": true}}, "message": "m", "error": "user_activity_detected"},
			`{"error":"user_activity_detected","message":"m","userCommands":[{"command":"ls","stdoutLossy":true,"stdout":"o"}]}`},
		{"grep", reply{"matches": []any{reply{"text": "a<b", "line": 3, "match": true}}, "nextOffset": int64(7), "eof": false},
			`{"eof":false,"nextOffset":7,"matches":[{"line":3,"match":true,"text":"a<b"}]}`},
		{"other values", reply{"f": 1.5, "list": []string{"a"}, "any": map[string]any{"z": 1, "a": reply{"y": 2, "stdout": "s"}}},
			`{"any":{"a":{"y":2,"stdout":"s"},"z":1},"f":1.5,"list":["a"]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.reply.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			// The same object encoding/json writes, key order aside.
			std, err := json.Marshal(map[string]any(tc.reply))
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(std, &b)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("differs from encoding/json: %s", std)
			}
		})
	}
}

// TestReplyMarshalError: a value encoding/json cannot write fails the
// reply, and result() answers internal_error instead.
func TestReplyMarshalError(t *testing.T) {
	r := ok(reply{"bad": func() {}})
	if _, err := r.MarshalJSON(); err == nil {
		t.Fatal("no error for a func value")
	}
	if res := result(r); !res.IsError {
		t.Errorf("result: %+v", res)
	}
}
