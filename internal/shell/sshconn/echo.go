package sshconn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/shell"
)

// Over SSH tandem holds only the PTY's master side through sshd, so it
// cannot ask the terminal's modes itself. The server's stty can: a small
// sh loop on a channel of its own answers each question with `stty -a`
// of the shell's terminal, read afresh, so a prompt that turned echo off
// (sudo, passwd, ssh, read -s, getpass) is seen before the keys typed at
// it are written. One question costs a round trip and a fork of stty on
// the server, a few milliseconds.

// echoScript answers every line on its stdin with one line: "ok" or
// "err", then the words of `stty -a` run on the terminal of shell $1 (its
// fd 0, opened afresh each time, so a shell that ended answers err).
// Where /proc is missing it finds the terminal with ps. stty is looked
// up in the system's default PATH, never a function or the user's PATH.
const echoScript = `p=/proc/$1/fd/0; [ -e "$p" ] || p=/dev/$(ps -o tty= -p "$1" 2>/dev/null | tr -d ' '); set -f; ` +
	`while read -r _; do if s=$(command -p stty -a <"$p" 2>&1); then printf ok; else printf err; fi; printf ' %s' $s; printf '\n'; done`

// echoTimeout bounds one question, the helper's start included. A key
// waits for the answer, so it is short; past it the mode is unknown.
const echoTimeout = 3 * time.Second

// echoRetry is how long a helper that could not start is not tried again:
// a server without stty would otherwise cost a channel per keystroke.
const echoRetry = 5 * time.Second

// echoProbe is the conn's echo helper, started on the first question.
type echoProbe struct {
	mu       sync.Mutex // one question at a time
	h        *echoHelper
	failedAt time.Time // when a helper last failed to start
	failed   error
}

// echoHelper is one running echo loop on the server.
type echoHelper struct {
	pid   int
	s     *ssh.Session
	ask   io.Writer
	lines chan string   // its answers; closed when its output ends
	gone  chan struct{} // closed when tandem abandons it
}

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
	answer, err := c.echo.question(ctx, c, shellPID)
	if err != nil {
		return false, fmt.Errorf("sshconn: terminal mode of shell %d: %w", shellPID, err)
	}
	on, err := parseEcho(answer)
	if err != nil {
		return false, fmt.Errorf("sshconn: terminal mode of shell %d: %w", shellPID, err)
	}
	return on, nil
}

// question asks the helper for shellPID once. A running helper that
// ended is replaced at once; a helper that cannot start or does not answer
// in time is not tried again for echoRetry, or each key would wait for it.
func (p *echoProbe) question(ctx context.Context, c *conn, shellPID int) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h != nil && p.h.pid == shellPID {
		answer, err := p.h.question(ctx)
		if err == nil {
			return answer, nil
		}
		p.drop()
		if ctx.Err() != nil {
			p.fail(ctx, err)
			return "", err
		}
	}
	p.drop()
	if p.failed != nil && time.Since(p.failedAt) < echoRetry {
		return "", p.failed
	}
	h, err := c.startEcho(ctx, shellPID)
	if err == nil {
		p.h = h
		var answer string
		if answer, err = h.question(ctx); err == nil {
			p.failed = nil
			return answer, nil
		}
		p.drop()
	}
	p.fail(ctx, err)
	return "", err
}

// fail remembers err as the helper's failure, unless the caller gave up.
func (p *echoProbe) fail(ctx context.Context, err error) {
	if !errors.Is(ctx.Err(), context.Canceled) {
		p.failed, p.failedAt = err, time.Now()
	}
}

// drop abandons the running helper, if any.
func (p *echoProbe) drop() {
	if p.h == nil {
		return
	}
	close(p.h.gone)
	p.h.s.Close()
	p.h = nil
}

// question writes one line and waits for the answer.
func (h *echoHelper) question(ctx context.Context) (string, error) {
	if _, err := h.ask.Write([]byte("?\n")); err != nil {
		return "", fmt.Errorf("ask: %w", err)
	}
	select {
	case line, ok := <-h.lines:
		if !ok {
			return "", errors.New("the stty helper ended")
		}
		return line, nil
	case <-ctx.Done():
		return "", fmt.Errorf("no answer from stty: %w", ctx.Err())
	}
}

// startEcho starts the echo loop for shellPID on its own channel.
func (c *conn) startEcho(ctx context.Context, shellPID int) (*echoHelper, error) {
	var (
		ask io.WriteCloser
		out io.Reader
	)
	s, err := c.openSession(ctx, func(s *ssh.Session) (err error) {
		if ask, err = s.StdinPipe(); err != nil {
			return err
		}
		if out, err = s.StdoutPipe(); err != nil {
			return err
		}
		return s.Start("exec sh -c " + shellQuote(echoScript) + " tandem-echo " + strconv.Itoa(shellPID))
	})
	if err == nil && !c.track() {
		s.Close()
		err = net.ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("start stty helper: %w", err)
	}
	h := &echoHelper{pid: shellPID, s: s, ask: ask, lines: make(chan string), gone: make(chan struct{})}
	go func() {
		defer c.wg.Done()
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case h.lines <- sc.Text():
			case <-h.gone:
				return
			}
		}
	}()
	return h, nil
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
