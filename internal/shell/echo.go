package shell

import "context"

// ShellEchoReporter is implemented by a Conn that sees the terminal's
// modes only through the shell's process (over SSH, the server's stty reads
// the terminal of the shell shellPID). It answers as EchoReporter does:
// false only in canonical mode with echo off (a password prompt). The
// answer is read when asked, so keys written right after it meet the mode
// it reported.
type ShellEchoReporter interface {
	ShellInputEchoed(ctx context.Context, shellPID int) (bool, error)
}

// EchoOn and EchoOff are inputEcho's answers besides EchoUnknown: the
// terminal shows what is typed (1), or hides it (0, a password prompt).
const (
	EchoOff = 0
	EchoOn  = 1
)

// inputEcho reports whether keys written now show on the terminal:
// EchoOn, EchoOff, or EchoUnknown when the backend cannot tell (no
// reporter, the shell's pid not known yet, or the look failed). Callers
// treat EchoUnknown as EchoOff: such keys are neither recorded nor
// reported. It takes the Shell's lock briefly; call it without holding it.
func (s *Shell) inputEcho(ctx context.Context) int {
	var (
		on  bool
		err error
	)
	switch c := s.conn.(type) {
	case EchoReporter:
		on, err = c.InputEchoed()
	case ShellEchoReporter:
		pid := s.PID()
		if pid == 0 {
			return EchoUnknown
		}
		on, err = c.ShellInputEchoed(ctx, pid)
	default:
		return EchoUnknown
	}
	switch {
	case err != nil:
		return EchoUnknown
	case on:
		return EchoOn
	}
	return EchoOff
}
