package shell

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// history renders entries the way `HISTTIMEFORMAT=$'\036' history N` does.
func history(first int, entries ...string) string {
	var b strings.Builder
	for i, e := range entries {
		fmt.Fprintf(&b, "%5d  \x1e%s\n", first+i, e)
	}
	return b.String()
}

func TestHistoryLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"one", history(7, "echo one"), []string{"echo one"}},
		{"several", history(98, "echo a", "echo b", "(exit 3)"), []string{"echo a", "echo b", "(exit 3)"}},
		{"here-document", history(5, "cat <<EOF\nx\n   12  not an entry\nEOF\n", "echo after"),
			[]string{"cat <<EOF\nx\n   12  not an entry\nEOF", "echo after"}},
		{"modified entry", "    3* \x1eecho edited\n    4  \x1eecho next\n", []string{"echo edited", "echo next"}},
		{"empty", "", nil},
		{"no marker", "    3  echo old format\n", nil},
	}
	for _, tc := range tests {
		if got := historyLines(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzHistoryLines: whatever the shell sends, splitting it never panics,
// and entries without RS bytes or numbered lines of their own come back
// exactly.
func FuzzHistoryLines(f *testing.F) {
	f.Add("echo a", "cat <<EOF\nx\nEOF", 3)
	f.Add("", "b", 99999)
	f.Fuzz(func(t *testing.T, a, b string, first int) {
		_ = historyLines(a + b)
		if strings.ContainsAny(a+b, "\x1e\n") || first < 0 {
			return
		}
		got := historyLines(history(first, a, b))
		want := []string{strings.TrimRight(a, "\n"), strings.TrimRight(b, "\n")}
		if !slices.Equal(got, want) {
			t.Fatalf("%q, want %q", got, want)
		}
	})
}
