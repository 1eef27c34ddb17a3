package mcp

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeArgsLong: an upload's content of megabytes, taken out before
// the key checks, changes nothing of what they refuse: a key given twice,
// a key that differs only in case (or by Unicode folding), an unknown
// key, a duplicate deeper down, a wrong type; and a long string that is
// not plain (escapes) or a long value of a key the struct does not have
// decodes as before.
func TestDecodeArgsLong(t *testing.T) {
	big := strings.Repeat("QUJD", 1<<20) // 4 MiB of base64
	tests := []struct {
		name, raw, field string
	}{
		{"plain", `{"sessionName":"s","path":"p","content":"` + big + `","encoding":"base64"}`, ""},
		{"twice", `{"content":"` + big + `","content":"x"}`, "content"},
		{"twice both long", `{"content":"` + big + `","content":"` + big + `"}`, "content"},
		{"twice escaped", `{"content":"` + big + `","c\u006fntent":"x"}`, "content"},
		{"case", `{"content":"x","Content":"` + big + `"}`, "Content"},
		{"case first", `{"Content":"` + big + `"}`, "Content"},
		{"folded", "{\"sessionName\":\"" + big + "\",\"\u017fessionName\":\"x\"}", "\u017fessionName"},
		{"folded first", "{\"\u017fessionName\":\"" + big + "\",\"sessionName\":\"x\"}", "sessionName"},
		{"unknown", `{"content":"` + big + `","sudo":true}`, "sudo"},
		{"unknown long", `{"contents":"` + big + `"}`, "contents"},
		{"deep duplicate", `{"content":"` + big + `","x":{"y":1,"y":2}}`, "x.y"},
		{"wrong type", `{"content":"` + big + `","overwrite":"yes"}`, "overwrite"},
		{"content not a string", `{"path":"` + big + `","content":1}`, "content"},
		{"escaped", `{"content":"` + big + `\n` + big + `\u00e9"}`, ""},
		{"control", "{\"content\":\"" + big + "\x01\"}", ""},
		{"trailing", `{"content":"` + big + `"} {"x":1}`, ""},
		{"unterminated", `{"content":"` + big + `"`, ""},
		{"syntax after", `{"content":"` + big + `",}`, ""},
		{"bad literal after", `{"content":"` + big + `","overwrite":tru}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got, want uploadArgs
			err := decodeArgs([]byte(tc.raw), &got)
			wantErr := decodeStrict([]byte(tc.raw), &want)
			if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Fatalf("decodeArgs = %v, without elision %v", err, wantErr)
			}
			if err == nil {
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("decoded %+.80v, without elision %+.80v", got, want)
				}
				if tc.field != "" {
					t.Fatalf("decoded, want a refusal naming %q", tc.field)
				}
				return
			}
			var f *failure
			if !errors.As(err, &f) || f.code != codeInvalidArguments || (tc.field != "" && f.fields["field"] != tc.field) {
				t.Fatalf("err = %#v, want invalid_arguments naming %q", err, tc.field)
			}
		})
	}
	// The long value was taken out, not read by the decoder.
	var a uploadArgs
	if small, long := elideLong([]byte(tests[0].raw), &a, longStringBytes); len(long) != 1 || len(small) > 200 {
		t.Fatalf("elideLong took out %d strings, left %d bytes", len(long), len(small))
	}
}

// FuzzDecodeArgsLong: with every plain string taken out (least 1), the
// arguments decode to the same struct, or are refused with the same
// failure, as without.
func FuzzDecodeArgsLong(f *testing.F) {
	for _, s := range []string{
		`{"sessionName":"a","path":"p","content":"QUJD","encoding":"base64","overwrite":true}`,
		`{"content":"a","content":"b"}`, `{"content":"a","Content":"b"}`, `{"x":[1,{"y":"z"}],"path":"q"}`,
		`{"content":"a\"b","path":"\u0070"}`, `{"content":null}`, `{"content":"é"} x`, `{"path":"a",}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var got, want uploadArgs
		raw = normalArgs(raw)
		err := decodeEliding(raw, &got, 1)
		wantErr := decodeStrict(raw, &want)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Fatalf("%q: eliding %v, whole %v", raw, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: eliding %+v, whole %+v", raw, got, want)
		}
	})
}

// normalArgs is what decodeArgs makes of empty or null arguments.
func normalArgs(raw []byte) []byte {
	if len(strings.TrimSpace(string(raw))) == 0 || strings.TrimSpace(string(raw)) == "null" {
		return []byte("{}")
	}
	return raw
}
