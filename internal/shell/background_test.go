package shell_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// TestBackgroundOutputKeptApart: what a background job prints after the
// command that started it never lands in a later command's output, and
// none of it is lost: it is in the background record (issue 18: a job's
// lines landed in an unrelated later command, and the rest reached
// nobody). Jobs started with &, in a subshell, and with nohup.
func TestBackgroundOutputKeptApart(t *testing.T) {
	jobs := []struct{ name, start string }{
		{"&", `(for i in 1 2 3 4 5 6; do echo "%s tick $i"; echo "%s err $i" >&2; sleep 0.2; done) &`},
		{"subshell", `( (for i in 1 2 3 4 5 6; do echo "%s tick $i"; echo "%s err $i" >&2; sleep 0.2; done) & )`},
		{"nohup", `nohup sh -c 'for i in 1 2 3 4 5 6; do echo "%s tick $i"; echo "%s err $i" >&2; sleep 0.2; done' &`},
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := start(t, dial(t))
			for _, job := range jobs {
				tag := "job-" + strings.ReplaceAll(job.name, "&", "amp")
				first := h.exec(t, fmt.Sprintf(job.start, tag, tag))
				seen := first.Stdout.String() + first.Stderr.String()
				// Later commands while the job prints, and after.
				var later []shell.Record
				for i := range 4 {
					later = append(later, h.exec(t, fmt.Sprintf("sleep 0.3; echo unrelated %d; echo unrelated-err %d >&2", i, i)))
				}
				time.Sleep(300 * time.Millisecond) // the job's last line
				later = append(later, h.exec(t, "echo last"))
				for i, r := range later {
					// bash's own notice that the job ended ("[1]+  Done …",
					// naming its command) comes on the stderr of the command
					// during which it ended, as on any terminal.
					if strings.Contains(r.Stdout.String()+withoutNotice(r.Stderr.String()), tag) {
						t.Fatalf("%s: command %d got the job's output: %q %q", job.name, i, r.Stdout.String(), r.Stderr.String())
					}
				}
				for i, r := range later[:4] {
					if r.Stdout.String() != fmt.Sprintf("unrelated %d\n", i) || withoutNotice(r.Stderr.String()) != fmt.Sprintf("unrelated-err %d\n", i) {
						t.Fatalf("%s: command %d: %q %q", job.name, i, r.Stdout.String(), r.Stderr.String())
					}
				}
				if bg, ok := h.sh.TakeBackground(); ok {
					seen += bg.Stdout.String() + bg.Stderr.String()
				}
				for i := 1; i <= 6; i++ {
					for _, line := range []string{fmt.Sprintf("%s tick %d\n", tag, i), fmt.Sprintf("%s err %d\n", tag, i)} {
						if strings.Count(seen, line) != 1 {
							t.Fatalf("%s: %q is in the first command's output and the background output %d times; they hold:\n%s",
								job.name, line, strings.Count(seen, line), seen)
						}
					}
				}
			}
		})
	}
}

// withoutNotice drops bash's notice of a job that ended ("[1]+  Done",
// then the job's command, over several lines) from a command's stderr.
func withoutNotice(stderr string) string {
	i := jobNotice.FindStringIndex(stderr)
	if i == nil {
		return stderr
	}
	rest := stderr[i[0]:]
	for _, own := range []string{"\nunrelated-err", "\nlast"} {
		if j := strings.LastIndex(rest, own); j >= 0 {
			return stderr[:i[0]] + rest[j+1:]
		}
	}
	return stderr[:i[0]]
}

var jobNotice = regexp.MustCompile(`(?m)^\[\d+\][+-]? +Done`)

func TestMayBackground(t *testing.T) {
	for cmd, want := range map[string]bool{
		"sleep 1 &": true, "a & b": true, "(x &)": true, "nohup x": true, "setsid -f x": true,
		"a && b": false, "a >&2": false, "a &>/dev/null": false, "a 2>&1": false, "a |& b": false, "echo ok": false,
	} {
		if got := shell.MayBackground(cmd); got != want {
			t.Errorf("%q: %v, want %v", cmd, got, want)
		}
	}
}
