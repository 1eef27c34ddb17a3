// Package testenv starts the real external programs tandem's tests run
// against: OpenSSH sshd, headless Chromium.
package testenv

import (
	"os"
	"testing"
)

// Missing stops a test whose real dependency (a program, a kernel feature)
// is absent: it fails under CI=true, where nothing may be skipped, and
// skips elsewhere so a developer without the dependency can still run the
// rest.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI requires it: "+format, args...)
	}
	t.Skipf(format, args...)
}
