package transfer_test

import (
	"testing"

	"github.com/tandem-sh/tandem/internal/transfer"
)

// TestRel: the path policies judge, relative to the workspace; a root
// that is a prefix of a sibling's name ("/w" of "/work") is no parent.
func TestRel(t *testing.T) {
	tests := []struct{ root, real, want string }{
		{"/w", "/w", "."},
		{"/w", "/w/a/b.txt", "a/b.txt"},
		{"/w/", "/w/a", "a"},
		{"/", "/etc/x", "etc/x"},
		{"/w", "/work/x", "/work/x"},
	}
	for _, tc := range tests {
		if got := transfer.Rel(tc.root, tc.real); got != tc.want {
			t.Errorf("Rel(%q, %q) = %q, want %q", tc.root, tc.real, got, tc.want)
		}
	}
}
