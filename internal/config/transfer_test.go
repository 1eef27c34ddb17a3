package config_test

import (
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/config"
)

// TestTransferLimits: limits.uploadBytes and limits.downloadBytes default
// to 50 MiB, and a value out of range names the key; a rule with a path
// alone is a rule.
func TestTransferLimits(t *testing.T) {
	dir := t.TempDir()
	c, err := config.Parse([]byte("policy: {rules: [{path: '.git/**', decision: deny}]}\n"), dir, "/home/x")
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.UploadBytes != 50<<20 || c.Limits.DownloadBytes != 50<<20 || c.Policy.Rules[0].Path != ".git/**" {
		t.Errorf("defaults: upload %d, download %d, rule %+v", c.Limits.UploadBytes, c.Limits.DownloadBytes, c.Policy.Rules[0])
	}
	for _, tc := range []struct{ yaml, want string }{
		{"limits: {uploadBytes: -1}\n", "limits.uploadBytes: must be between 1 and"},
		{"limits: {downloadBytes: 2147483648}\n", "limits.downloadBytes: must be between 1 and"},
	} {
		if _, err := config.Parse([]byte(tc.yaml), dir, "/home/x"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
