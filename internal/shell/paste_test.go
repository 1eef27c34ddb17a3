package shell_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// pasteLine is line i of a test paste: builtins and programs, some of them
// failing, so that every record's command and exit code can be checked.
func pasteLine(i int) (line string, exit int) {
	switch i % 5 {
	case 0:
		return fmt.Sprintf("/bin/echo p%d", i), 0
	case 1:
		return fmt.Sprintf("echo p%d", i), 0
	case 2:
		return fmt.Sprintf("(exit %d)", i%7), i % 7
	case 3:
		return fmt.Sprintf("sh -c 'echo p%d; exit 4'", i), 4
	}
	return fmt.Sprintf("/bin/false p%d", i), 1
}

// sendPaste types text the way the browser page sends a paste: in pieces
// of at most 8 KiB, one after another.
func sendPaste(t *testing.T, sh *shell.Shell, text string) {
	t.Helper()
	ctx := shell.WithViewer(context.Background(), "paster")
	for i := 0; i < len(text); i += 8192 {
		if err := sh.Input(ctx, []byte(text[i:min(len(text), i+8192)])); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPasteEveryCommandReported: a paste of hundreds or thousands of lines
// typed at once runs every line, and every line comes back as its own
// human command, in order, with its exact exit code and the viewer who
// typed it (issue 18: a 300-line paste reported 64 commands, and a 20-line
// paste of programs lost some). The shell is idle afterwards.
func TestPasteEveryCommandReported(t *testing.T) {
	sizes := map[string][]int{"pty": {300, 2000}, "local": {300, 2000}, "ssh": {300, 2000}}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, n := range sizes[name] {
				h := start(t, dial(t))
				var b strings.Builder
				for i := range n {
					line, _ := pasteLine(i)
					b.WriteString(line + "\r")
				}
				sendPaste(t, h.sh, b.String())
				got := h.usersWithin(t, n, time.Duration(n)*20*time.Millisecond+20*time.Second)
				if len(got) != n {
					t.Fatalf("%d lines: %d human commands", n, len(got))
				}
				for i, r := range got {
					line, exit := pasteLine(i)
					if r.Command != line || !r.ExitKnown || r.ExitCode != exit || r.Viewer != "paster" || r.Unattributed {
						t.Fatalf("%d lines: command %d is %q exit %d (known %v) by %q unattributed %v; want %q exit %d by paster",
							n, i, r.Command, r.ExitCode, r.ExitKnown, r.Viewer, r.Unattributed, line, exit)
					}
				}
				h.idle(t)
			}
		})
	}
}
