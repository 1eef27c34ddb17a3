package stdio

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, line string
		code       int // 0: passes
		id         string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, ""},
		{"response", `{"jsonrpc":"2.0","id":"a","result":{}}`, 0, ""},
		{"not json", `hello`, codeParse, "null"},
		{"truncated", `{"jsonrpc":"2.0","id":1`, codeParse, "null"},
		{"deep", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), codeParse, "null"},
		{"deep in params", `{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200) + "}", codeParse, "null"},
		{"brackets in strings do not count", `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"` + strings.Repeat("[", 1000) + `"}}`, 0, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, codeInvalid, "null"},
		{"number", `42`, codeInvalid, "null"},
		{"wrong version", `{"jsonrpc":"1.0","id":7,"method":"ping"}`, codeInvalid, "7"},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, codeInvalid, "null"},
		{"method not string", `{"jsonrpc":"2.0","id":3,"method":5}`, codeInvalid, "3"},
		{"params scalar", `{"jsonrpc":"2.0","id":3,"method":"ping","params":5}`, codeInvalid, "3"},
		{"nothing", `{"jsonrpc":"2.0","id":3}`, codeInvalid, "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reply := Check([]byte(tc.line))
			if tc.code == 0 {
				if reply != nil {
					t.Fatalf("refused: %s", reply)
				}
				return
			}
			var r struct {
				ID    json.RawMessage
				Error struct{ Code int }
			}
			if err := json.Unmarshal(reply, &r); err != nil || r.Error.Code != tc.code || string(r.ID) != tc.id {
				t.Fatalf("reply %s, want code %d id %s", reply, tc.code, tc.id)
			}
		})
	}
}

// TestGuardKeepsLinesWhole: the guard's error replies never interleave with
// the SDK's output, even when the SDK writes a line in pieces.
func TestGuardKeepsLinesWhole(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	g := New(inR, outW, nil)
	w := g.Writer()
	go func() {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0",`))
		_, _ = inW.Write([]byte("garbage\n"))
		_, _ = w.Write([]byte(`"id":1,"result":{}}` + "\n"))
	}()
	sc := bufio.NewScanner(outR)
	for range 2 {
		if !sc.Scan() {
			t.Fatal(sc.Err())
		}
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("output line is not JSON: %q", sc.Text())
		}
	}
	// A good line reaches the SDK side.
	go func() { _, _ = inW.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")) }()
	line, err := bufio.NewReader(g.Reader()).ReadString('\n')
	if err != nil || !strings.Contains(line, `"ping"`) {
		t.Fatalf("good line: %q %v", line, err)
	}
}
