package audit_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/audit"
)

func TestAuditRedact(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no secrets", `{"name":"dev","host":"h","port":22}`, `{"host":"h","name":"dev","port":22}`},
		{"password", `{"name":"dev","password":"hunter2"}`, `{"name":"dev","password":"[redacted]"}`},
		{"all secret keys", `{"privateKey":"-----BEGIN","passphrase":"p","sessionToken":"tok","keyFilePath":"/k"}`,
			`{"keyFilePath":"/k","passphrase":"[redacted]","privateKey":"[redacted]","sessionToken":"[redacted]"}`},
		{"case and separators", `{"PASSWORD":"a","Private_Key":"b","pass-phrase":"c","PrivateKey":"d"}`,
			`{"PASSWORD":"[redacted]","PrivateKey":"[redacted]","Private_Key":"[redacted]","pass-phrase":"[redacted]"}`},
		{"nested", `{"a":{"b":[{"password":"x"},{"c":{"passphrase":"y"}}]}}`,
			`{"a":{"b":[{"password":"[redacted]"},{"c":{"passphrase":"[redacted]"}}]}}`},
		{"non-string secret", `{"password":{"v":"x"},"privateKey":[1,2],"passphrase":123}`,
			`{"passphrase":"[redacted]","password":"[redacted]","privateKey":"[redacted]"}`},
		{"secret in array of arrays", `[[{"password":"x"}]]`, `[[{"password":"[redacted]"}]]`},
		{"value named like a key stays", `{"command":"echo password"}`, `{"command":"echo password"}`},
		{"big integers kept exact", `{"n":12345678901234567890}`, `{"n":12345678901234567890}`},
		{"html kept readable", `{"command":"a && b < c"}`, `{"command":"a && b < c"}`},
		{"idempotent", `{"password":"[redacted]"}`, `{"password":"[redacted]"}`},
		{"null", `null`, `null`},
		{"empty", ``, ``},
		{"whitespace", " \n", ``},
		{"truncated", `{"password":"hunter2"`, `{"_unparseable":true}`},
		{"trailing data", `{"a":1} {"password":"x"}`, `{"_unparseable":true}`},
		{"not json", `password=hunter2`, `{"_unparseable":true}`},
		{"bad escape", `{"password":"\x"}`, `{"_unparseable":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(audit.Redact(json.RawMessage(tc.in))); got != tc.want {
				t.Errorf("Redact(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestRedactFoldsUnicode(t *testing.T) {
	for _, k := range []string{"pa\u017f\u017fword", "private\u212Aey", "PA\u017fS-PHRASE", "session_\u212Aey"} {
		got := string(audit.Redact([]byte(`{"` + k + `":"s3cret"}`)))
		if strings.Contains(got, "s3cret") != (k == "session_\u212Aey") {
			t.Errorf("Redact with key %q = %s", k, got)
		}
	}
}
