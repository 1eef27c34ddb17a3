package mcp

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		raw, field string
		ok         bool
	}{
		{`{"sessionName":"a","sessionToken":"b","command":"c"}`, "", true},
		{``, "", true},
		{`null`, "", true},
		{`{"command":1}`, "command", false},
		{`{"timeoutSeconds":"x"}`, "timeoutSeconds", false},
		{`{"sudo":true}`, "sudo", false},
		{`[]`, "", false},
		{`{"command":"a"} {"x":1}`, "", false},
		{`{"command":`, "", false},
		{`{"command":"a","command":"b"}`, "command", false},
		{`{"Command":"a"}`, "Command", false},
		{`{"sessionT\u006fken":"a"}`, "", true},
		{`{"sessionnamE":"a"}`, "sessionnamE", false},
		{"{\"commaNd\":\"a\"}", "commaNd", false},
		{"{\"timeout\u017feconds\":1}", "timeout\u017feconds", false},
		{`{"command":"a","comm\u0061nd":"b"}`, "command", false},
		{`{"command":"a","x":{"y":1,"y":2}}`, "x.y", false},
		{`{"command":"a","x":[1,{"y":1,"Y":2}]}`, "x[1].Y", false},
		{`{"command":"a","x":{"y":1,"y":2}`, "x.y", false},
		{`{"command":"a",}`, "", false},
		{`{"command":'a'}`, "", false},
		{`{"command":"a"`, "", false},
		{`{"command" "a"}`, "", false},
		{strings.Repeat("[", 20000), "", false},
		{`{"command":"` + strings.Repeat("[", 20000) + `"}`, "", true},
	}
	for _, tc := range tests {
		var a execArgs
		err := decodeArgs([]byte(tc.raw), &a)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.raw, err)
			continue
		}
		var f *failure
		if err != nil && (!errors.As(err, &f) || f.code != codeInvalidArguments || f.fields["field"] != tc.field) {
			t.Errorf("%s: %#v", tc.raw, err)
		}
	}
}

func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{"sessionName":"a","command":"ls","timeoutSeconds":3}`, `{"x":[1,{"y":null}]}`, `"str"`, `{"command":"\u0000"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var a execArgs
		err := decodeArgs(raw, &a)
		if err == nil {
			return
		}
		var fl *failure
		if !errors.As(err, &fl) || fl.code != codeInvalidArguments || fl.msg == "" {
			t.Fatalf("decodeArgs(%q) = %v, want an invalid_arguments failure", raw, err)
		}
	})
}

func TestAuditArgsFromExactKeys(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		decoded bool
		want    string
	}{
		{`{"name":"a","password":"s3cret"}`, true, `{"name":"a","password":"[redacted]"}`},
		{"{\"pa\u017f\u017fword\":\"s3cret\"}", false, "{\"pa\u017f\u017fword\":\"[redacted]\"}"},
		{`{"name":"a","oops":"s3cret"}`, false, `{"name":"[redacted]","oops":"[redacted]"}`},
		{`"s3cret"`, false, `{"_unparseable":true}`},
	} {
		if got := string(auditArgs([]byte(tc.raw), tc.decoded)); got != tc.want {
			t.Errorf("auditArgs(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}
