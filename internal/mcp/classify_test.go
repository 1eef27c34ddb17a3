package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/target"
)

// TestEveryFailureHasItsCode: every way the layers below fail comes back
// with a code of its own; internal_error is left for tandem's bugs
// (issue 18: a stopped shell, a shell that did not start, a session closed
// under a call and a spool that cannot be read answered internal_error).
func TestEveryFailureHasItsCode(t *testing.T) {
	s := New(Deps{InlineOutputBytes: 1024})
	c := session.Caller{Tenant: "t", ID: "c"}
	rec := session.Record{ID: "cmd_1"}
	tests := []struct {
		err  error
		code string
	}{
		{fmt.Errorf("exec: %w", shell.ErrClosed), codeSessionEnded},
		{fmt.Errorf("connect: shell start: %w: relay: %w", shell.ErrStart, io.ErrUnexpectedEOF), codeConnectFailed},
		{fmt.Errorf("exec: %w: stage key unanswered", shell.ErrUnresponsive), codeUnresponsive},
		{fmt.Errorf("cancel: %w: survived SIGKILL", shell.ErrUnresponsive), codeUnresponsive},
		{fmt.Errorf("exec: %w: exec bash", shell.ErrIntegrationLost), codeIntegrationLost},
		{&partialError{err: fmt.Errorf("exec: %w", shell.ErrIntegrationLost), rec: rec}, codeIntegrationLost},
		{fmt.Errorf("exec: %w: su", shell.ErrNestedShell), codeIntegrationLost},
		{fmt.Errorf("read output: %w: %w", errOutputRead, io.ErrUnexpectedEOF), codeOutputUnavailable},
		{fmt.Errorf("exec: interrupted: %w", context.Canceled), codeCancelled},
		{fmt.Errorf("exec: %w", shell.ErrCaptureFailed), codeCaptureFailed},
		{fmt.Errorf("send input: %w", shell.ErrNotRunning), codeNotRunning},
		{fmt.Errorf("exec: %w: NUL", shell.ErrInvalidCommand), codeInvalidArguments},
		{&shell.ExitError{Status: 3, Where: "the shell"}, codeShellExited},
		{fmt.Errorf("x: %w", shell.ErrConnectionLost), codeConnectionLost},
		{&session.BusyError{Kind: session.BusyHuman, Command: "sleep 5", CommandID: "cmd_2", Since: time.Now()}, codeBusy},
		{&session.TimeoutError{Partial: rec}, codeTimeout},
		{&session.EndedError{Name: "s", Reason: session.EndHumanExit}, codeSessionEnded},
		{&session.GateError{Since: time.Now()}, codeUserActivity},
		{&session.TokenError{Name: "s"}, codeInvalidToken},
		{fmt.Errorf("x: %w", session.ErrDraining), codeShuttingDown},
		{fmt.Errorf("x: %w", session.ErrNameTaken), codeSessionExists},
		{fmt.Errorf("connect: record the session: %w", store.ErrNameTaken), codeSessionExists}, // held by another node
		{fmt.Errorf("x: %w", target.ErrUnknown), codeUnknownTarget},
		{fmt.Errorf("x: %w", store.ErrSharedUnavailable), codeStoreUnavailable},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), codeConnectFailed},
	}
	for _, tc := range tests {
		f := s.failure(c, tc.err)
		if f.code != tc.code || f.msg == "" {
			t.Errorf("%v: %s %q, want %s", tc.err, f.code, f.msg, tc.code)
		}
	}
	// A human's shell of their own passes: nothing needs reconnecting.
	if f := s.failure(c, fmt.Errorf("exec: %w: su", shell.ErrNestedShell)); !strings.Contains(f.msg, "Nothing needs reconnecting") || strings.Contains(f.msg, "ssh_disconnect") {
		t.Errorf("a human's shell of their own: %q", f.msg)
	}
	// What nothing names is a bug of tandem's, and says so.
	if f := s.failure(c, errors.New("something new")); f.code != codeInternal {
		t.Errorf("an unknown error: %s", f.code)
	}
}
