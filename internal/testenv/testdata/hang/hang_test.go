// Package hang is a fixture for .ci/progress: a test that never ends, so
// that the suite's progress output can be shown to name it with its stack.
// `go test ./...` never reaches it (testdata is not a package path).
package hang

import (
	"os"
	"testing"
)

func TestEnds(t *testing.T) {}

func TestNeverEnds(t *testing.T) {
	if os.Getenv("TANDEM_HANG_FIXTURE") != "1" {
		t.Skip("a fixture: runs only under TestProgressNamesAHungTest")
	}
	t.Run("waiting", func(t *testing.T) { select {} })
}
