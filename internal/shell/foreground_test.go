package shell_test

import (
	"testing"

	"github.com/tandem-sh/tandem/internal/shell"
)

func TestTakesInterrupt(t *testing.T) {
	const bash = "Name:\tbash\nState:\tS (sleeping)\nSigCgt:\t000000004b817efb\n"
	tests := []struct {
		name, leader string
		want         bool
	}{
		{"a forked bash still in bash's handler", "Name:\tbash\nSigCgt:\t000000004b817efb\n", false},
		{"a forked bash that restored the default", "Name:\tbash\nSigCgt:\t0000000000010000\n", true},
		{"a program that exec'd", "Name:\tsleep\nSigCgt:\t0000000000000000\n", true},
		{"a program that catches SIGINT itself", "Name:\tpython3\nSigCgt:\t0000000180000002\n", true},
		{"a leader that has gone", "", true},
		{"a malformed mask", "Name:\tbash\nSigCgt:\tzz\n", true},
	}
	for _, tc := range tests {
		if got := shell.TakesInterrupt([]byte(bash), []byte(tc.leader)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
