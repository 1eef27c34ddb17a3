package sshconn_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestWaitingForInputOf: over a real sshd, the server's /proc tells a
// command blocked reading its terminal (read, cat, a raw-mode node prompt,
// node reading stdin in canonical mode, Python's input with readline)
// from one that sleeps, computes, or put the terminal in raw mode and
// waits for something else; bash's own builtin counts too.
func TestWaitingForInputOf(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"node", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s not found: %v", tool, err)
		}
	}
	c, tm := startBash(t, options(testenv.SSHD(t)))
	w, ok := c.(shell.ShellInputWaiter)
	if !ok {
		t.Fatal("the ssh conn does not tell whether a command waits for input")
	}
	tm.send(t, "echo PID=$$=\r")
	pid, _ := strconv.Atoi(tm.waitFor(t, `PID=(\d+)=`)[1])
	tm.waitFor(t, `[$#] $`)

	stop := filepath.Join(t.TempDir(), "stop")
	tests := []struct {
		name, line, shown string // typed at bash's prompt; shown once it runs
		waiting           bool
	}{
		{"read builtin", `read -r -p 'Name: ' v`, `Name: $`, true},
		{"cat", `echo reading; cat`, `reading\s*$`, true},
		{"node raw mode", `node -e 'process.stdout.write("Pick: "); process.stdin.setRawMode(true); process.stdin.on("data", d => { if (d[0] === 3) process.exit(0) })'`, `Pick: $`, true},
		{"node canonical", `node -e 'process.stdout.write("Line: "); process.stdin.on("data", () => {})'`, `Line: $`, true},
		{"python input", `python3 -c 'import readline; input("Q? ")'`, `Q\? $`, true},
		{"sleep", `printf working...; sleep 30`, `working\.\.\.$`, false},
		{"computing", `printf computing...; while :; do :; done`, `computing\.\.\.$`, false},
		// It ends once stop exists: in raw mode Ctrl-C is a key it does not read.
		{"node raw mode, not reading", `node -e 'process.stdin.setRawMode(true); process.stdout.write("timer..."); ` +
			`setInterval(() => { if (require("fs").existsSync(process.argv[1])) { process.stdin.setRawMode(false); process.exit(0) } }, 50)' ` + stop, `timer\.\.\.$`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm.send(t, tc.line+"\r")
			tm.waitFor(t, tc.shown)
			// A waiting command is seen within a few looks; one that is
			// not is never seen waiting over as many.
			got := false
			for range 8 {
				var err error
				if got, err = w.WaitingForInputOf(t.Context(), pid); err != nil {
					t.Fatal(err)
				}
				if got {
					break
				}
				time.Sleep(150 * time.Millisecond)
			}
			if got != tc.waiting {
				t.Errorf("WaitingForInputOf = %v; want %v", got, tc.waiting)
			}
			if strings.HasSuffix(tc.line, stop) {
				if err := os.WriteFile(stop, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				tm.send(t, "\x03") // the raw-mode prompt takes it as a key, and exits
			}
			tm.waitFor(t, `[$#] $`)
		})
	}
	if _, err := w.WaitingForInputOf(t.Context(), 0); err == nil {
		t.Error("pid 0: no error")
	}
}
