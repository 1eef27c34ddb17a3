package session

import (
	"context"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
)

// The errors and records of the layers below, under the session layer's
// name: the tool layer depends on sessions only, never on a backend.
type (
	// Record is one finished command; see shell.Record.
	Record = shell.Record
	// ExecOptions tunes one Exec; see shell.ExecOptions.
	ExecOptions = shell.ExecOptions
	// BusyError says why the shell cannot take a command now.
	BusyError = shell.BusyError
	// TimeoutError is a command that outlived its timeout.
	TimeoutError = shell.TimeoutError
	// ExitError is a shell that exited on its own.
	ExitError = shell.ExitError
	// InputState is what a running command does with the terminal.
	InputState = shell.InputState
	// HostKeyError is a refused SSH host key.
	HostKeyError = sshconn.HostKeyError
)

// What holds a busy shell; see shell.BusyError.
const (
	BusyAgent        = shell.BusyAgent
	BusyHuman        = shell.BusyHuman
	BusyPartialLine  = shell.BusyPartialLine
	BusyContinuation = shell.BusyContinuation
	BusyNotIdle      = shell.BusyNotIdle
	BusyHumanInput   = shell.BusyHumanInput
)

// Sentinels of the layers below, for errors.Is.
var (
	ErrConnectionLost  = shell.ErrConnectionLost
	ErrShellExited     = shell.ErrShellExited
	ErrNotRunning      = shell.ErrNotRunning
	ErrInvalidCommand  = shell.ErrInvalidCommand
	ErrInvalidInput    = shell.ErrInvalidInput
	ErrCaptureFailed   = shell.ErrCaptureFailed
	ErrIntegrationLost = shell.ErrIntegrationLost
	ErrNestedShell     = shell.ErrNestedShell
	ErrUnresponsive    = shell.ErrUnresponsive
	ErrStart           = shell.ErrStart
	ErrClosed          = shell.ErrClosed
	ErrAuth            = sshconn.ErrAuth
	ErrKey             = sshconn.ErrKey
	ErrHostKey         = sshconn.ErrHostKey
	ErrConnect         = sshconn.ErrConnect
	ErrConnectTimeout  = sshconn.ErrTimeout
)

// WithViewer names who types the input made with ctx; see
// shell.WithViewer.
func WithViewer(ctx context.Context, name string) context.Context {
	return shell.WithViewer(ctx, name)
}
