package shell_test

import (
	"context"
	"testing"
)

// TestHookRemovedOutputEndsAtPrompt: a human command that removes tandem's
// PROMPT_COMMAND hook ends without it; the prompt bash draws next (and its
// redraw when tandem repairs the hook) is not the command's output (issue
// 29: `unset PROMPT_COMMAND` was reported with the prompt as its stdout).
func TestHookRemovedOutputEndsAtPrompt(t *testing.T) {
	tests := []struct {
		name, cmd, out string
		exit           int
	}{
		{"unset", "unset PROMPT_COMMAND", "", 0},
		{"unset and print", "unset PROMPT_COMMAND; echo printed-$((1+1))", "printed-2\n", 0},
		{"replaced, failing", "PROMPT_COMMAND=(true); (exit 3)", "", 3},
	}
	for name, dial := range dialers(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range tests {
				h := start(t, dial(t))
				if err := h.sh.Input(context.Background(), []byte(tc.cmd+"\r")); err != nil {
					t.Fatal(err)
				}
				u := h.users(t, 1)[0]
				if got := u.Stdout.String(); got != tc.out || u.ExitCode != tc.exit || !u.ExitKnown {
					t.Errorf("%s: stdout %q exit %d (known %v); want %q exit %d", tc.name, got, u.ExitCode, u.ExitKnown, tc.out, tc.exit)
				}
				afterBreak(t, h, tc.name)
			}
		})
	}
}
