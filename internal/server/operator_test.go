package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestArgsSummary: the dashboard's audit table shows a call's command
// line, else its other arguments, never a session token, cut to size.
func TestArgsSummary(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct {
		args, want string
	}{
		{`{"sessionName":"dev","sessionToken":"s3cret","command":"make test"}`, "make test"},
		{`{"sessionName":"dev","sessionToken":"s3cret","message":"enter the password"}`, `{"message":"enter the password","sessionName":"dev"}`},
		{`{"sessionToken":"s3cret"}`, ""},
		{`{"command":"` + long + `"}`, strings.Repeat("é", 150) + "…"},
		{`not json`, ""},
		{``, ""},
	}
	for _, tc := range tests {
		if got := argsSummary(json.RawMessage(tc.args)); got != tc.want {
			t.Errorf("argsSummary(%.40s) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
