package sshconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// Over SSH tandem holds only the PTY's master side through sshd, so it
// cannot ask the terminal's modes itself. The server's stty can: the
// conn's helper (helper.go) answers each question with `stty -a` of the
// shell's terminal, read afresh, so a prompt that turned echo off (sudo,
// passwd, ssh, read -s, getpass) is seen before the keys typed at it are
// written. One question costs a round trip and a fork of stty on the
// server, a few milliseconds.

// echoTimeout bounds one question, the helper's start included. A key
// waits for the answer, so it is short; past it the mode is unknown.
const echoTimeout = 3 * time.Second

var _ shell.ShellEchoReporter = (*conn)(nil)

// ShellInputEchoed reports whether keys typed now would show on the
// terminal of the shell shellPID: false only in canonical mode with echo
// off, the mode password prompts use (see local's InputEchoed for why
// non-canonical modes count as echoing). It asks the server on every call.
func (c *conn) ShellInputEchoed(ctx context.Context, shellPID int) (bool, error) {
	if shellPID <= 0 {
		return false, fmt.Errorf("sshconn: terminal mode: invalid pid %d", shellPID)
	}
	ctx, cancel := context.WithTimeout(ctx, echoTimeout)
	defer cancel()
	a, err := c.question(ctx, "stty", shellPID, "")
	if err != nil {
		return false, fmt.Errorf("sshconn: terminal mode of shell %d: %w", shellPID, err)
	}
	answer := "ok " + strings.Join(a.data, " ")
	if a.err != "" {
		answer = "err " + a.err
	}
	on, err := parseEcho(answer)
	if err != nil {
		return false, fmt.Errorf("sshconn: terminal mode of shell %d: %w", shellPID, err)
	}
	return on, nil
}

// parseEcho reads the helper's answer: "ok" and the words of `stty -a`
// (GNU, BusyBox and BSD all print echo or -echo, icanon or -icanon).
func parseEcho(answer string) (bool, error) {
	words := strings.Fields(answer)
	if len(words) == 0 || words[0] != "ok" {
		msg := strings.TrimSpace(strings.TrimPrefix(answer, "err"))
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return false, fmt.Errorf("stty failed: %s", msg)
	}
	echo, canon := -1, -1
	for _, w := range words[1:] {
		switch w {
		case "echo":
			echo = 1
		case "-echo":
			echo = 0
		case "icanon":
			canon = 1
		case "-icanon":
			canon = 0
		}
	}
	if echo < 0 || canon < 0 {
		return false, errors.New("stty -a printed no echo or icanon setting")
	}
	return echo == 1 || canon == 0, nil
}
