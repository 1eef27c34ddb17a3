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
	"time"

	"golang.org/x/crypto/ssh"
)

// Every command sshd runs on an exec channel goes through the login's own
// shell, and bash, run by sshd, reads ~/.bashrc even when not interactive
// (Debian and most distributions build it with SSH_SOURCE_BASHRC). A login
// whose rc runs `pyenv init` or nvm pays for it on every channel: one look
// at /proc took as long as the rc, and a viewer's Ctrl-C, which waits for
// three such looks, reached the program seconds late. So the conn asks
// one helper instead: a bash without rc files on a channel of its own,
// started once, right after the shell, which answers each question with a
// round trip and no login at all. The rc is paid once, while the shell
// itself starts.

// helperScript answers one request per line on its stdin, "VERB PID
// [SIGNAL]": stat, status, comm and cmdline print /proc/PID's file;
// children prints, for PID and each of its children, "P" and its pid,
// then "A" and each argument of its command line; stty prints
// `stty -a` of the terminal of shell PID (its fd 0, opened afresh; where
// /proc is missing, found with ps), and kill sends SIGNAL to process group
// PID; input prints inputScript's facts about the terminal of shell PID;
// fg answers three times, with /proc/PID/stat, /proc/PID/status and
// the status of the leader of the group that holds PID's terminal. An
// answer is any number of data lines, each a space and one line of
// text (cmdline: one argument) with backslashes and newlines escaped as
// \\ and \n, then one line: "ok", or "err" and a reason. It first writes
// one ready byte, so what the login's rc printed is skipped.
const helperScript = `export LC_ALL=C
out() { local l=$1; l=${l//\\/\\\\}; l=${l//$'\n'/\\n}; printf ' %s\n' "$l"; }
# file F [DELIM]: F's lines (or DELIM-ended items) as data lines; a partial
# last one too. A read that fails (the process ended meanwhile) ends it.
file() { local l= n=0; while ((n++ < 1000)) && IFS= read -r -d "${2-$'\n'}" l; do out "$l"; l=; done <"$1" || return; [[ -z $l ]] || out "$l"; }
printf ` + helperReady + `
while read -r v p s; do
	case $p in ''|*[!0-9]*) echo "err invalid pid"; continue;; esac
	ok=
	case $v in
	stat|status|comm) file /proc/$p/$v 2>/dev/null && ok=1;;
	children) ok=1; for c in $p $(<"/proc/$p/task/$p/children"); do out "P$c"
		# cat reads the whole command line at once: bash's own reads would
		# take it in pieces, and a child that execs or exits between two
		# pieces would show a cut argv (a fork of bash as a bare "bash").
		cat "/proc/$c/cmdline" 2>/dev/null | while IFS= read -r -d '' a; do out "A$a"; done; done 2>/dev/null;;
	cmdline) file /proc/$p/$v '' 2>/dev/null && ok=1;;
	stty) t=/proc/$p/fd/0; [[ -e $t ]] || t=/dev/$(ps -o tty= -p "$p" 2>/dev/null | tr -d ' ')
		if m=$(command -p stty -a 2>&1 <"$t"); then out "$m"; echo ok; else echo "err ${m//$'\n'/ }"; fi; continue;;
	fg) { IFS= read -r l && { r=${l##*)}; set -- $r; g=${6:-0}; ok=1; }; } 2>/dev/null </proc/$p/stat
		if [[ $ok ]]; then out "$l"; echo ok; else printf 'err cannot read /proc/%s/stat\n' "$p" "$p" "$p"; continue; fi
		ok=; file /proc/$p/status 2>/dev/null && ok=1
		if [[ $ok ]]; then echo ok; else echo "err cannot read /proc/$p/status"; fi
		ok=; case $g in ''|*[!0-9]*|0|-*|$p) ;; *) file /proc/$g/status 2>/dev/null && ok=1;; esac
		if [[ $ok ]]; then echo ok; else echo "err no leader status"; fi; continue;;
	kill) if m=$(kill -s "$s" -- -"$p" 2>&1); then echo ok; else echo "err ${m//$'\n'/ }"; fi; continue;;
	input) ( set -- "$p"
` + inputScript + `
	) 2>/dev/null </dev/null | while IFS= read -r l; do out "$l"; done; echo ok; continue;;
	*) echo "err unknown request $v"; continue;;
	esac
	if [[ $ok ]]; then echo ok; else echo "err cannot read /proc/$p/$v"; fi
done`

const helperReady = "H"

// helperStartTimeout bounds the helper's start, the login's rc included.
const helperStartTimeout = 30 * time.Second

// helperRetry is how long a helper that could not start is not tried
// again: each try costs a login.
const helperRetry = 5 * time.Second

// errHelperDown says the helper is not running (it could not start, or
// failed lately); callers that can fall back to an exec channel do.
var errHelperDown = errors.New("the conn's helper is not running")

// helperProbe is the conn's helper, started once the shell runs and again
// after it fails. One question is asked at a time.
type helperProbe struct {
	sem      chan struct{} // holds a token while a question or start runs
	h        *helper
	failedAt time.Time // when a helper last failed to start
	failed   error
}

// helper is one running helper on the server.
type helper struct {
	s       *ssh.Session
	ask     io.Writer
	answers chan helperAnswer // closed when its output ends
	gone    chan struct{}     // closed when tandem abandons it
	// owed counts the answers still to come to questions whose caller
	// gave up (its context was cancelled): the next question skips them.
	owed int
}

// helperAnswer is one answer: its data lines, unescaped, and its status.
type helperAnswer struct {
	data []string
	err  string // "" for ok, else the reason
}

// acquire takes the helper for one question, waiting until ctx ends.
func (p *helperProbe) acquire(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the helper: %w", ctx.Err())
	}
}

func (p *helperProbe) release() { <-p.sem }

// startHelper starts the helper in the background, so that the login's rc
// runs while the shell starts rather than at the first question.
func (c *conn) startHelper() {
	if !c.track() {
		return
	}
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.life, helperStartTimeout)
		defer cancel()
		if c.helpers.acquire(ctx) != nil {
			return
		}
		defer c.helpers.release()
		if c.helpers.h == nil {
			_ = c.helpers.start(ctx, c)
		}
	}()
}

// start starts a helper, or records why it could not; the caller holds
// the helper.
func (p *helperProbe) start(ctx context.Context, c *conn) error {
	h, err := c.openHelper(ctx)
	if err != nil {
		if !errors.Is(ctx.Err(), context.Canceled) {
			p.failed, p.failedAt = err, time.Now()
		}
		return err
	}
	p.h, p.failed = h, nil
	return nil
}

// question asks the helper verb for pid (and sig, for kill). A helper that
// ended or gave no answer in time is dropped, and replaced at the next
// question; one that cannot start is not tried again for helperRetry, and
// the question fails with errHelperDown.
func (c *conn) question(ctx context.Context, verb string, pid int, sig string) (helperAnswer, error) {
	a, err := c.ask(ctx, verb+" "+strconv.Itoa(pid)+" "+sig+"\n", 1)
	if err != nil {
		return helperAnswer{}, err
	}
	return a[0], nil
}

// ask writes the request req, one line, and returns its n answers.
func (c *conn) ask(ctx context.Context, req string, n int) ([]helperAnswer, error) {
	p := &c.helpers
	if err := p.acquire(ctx); err != nil {
		return nil, err
	}
	defer p.release()
	if p.h == nil {
		if p.failed != nil && time.Since(p.failedAt) < helperRetry {
			return nil, fmt.Errorf("%w: %w", errHelperDown, p.failed)
		}
		if err := p.start(ctx, c); err != nil {
			return nil, fmt.Errorf("%w: %w", errHelperDown, err)
		}
	}
	a, err := p.h.question(ctx, req, n)
	if err != nil && !errors.Is(err, errGaveUp) {
		// It ended, or gave no answer in time: it may be stuck.
		p.drop()
	}
	return a, err
}

// errGaveUp is a question's error when its caller gave up before the
// answer came: the helper is kept, and owes the answer to no one.
var errGaveUp = errors.New("the question was given up")

// drop abandons the running helper, if any; the caller holds the helper.
func (p *helperProbe) drop() {
	if p.h == nil {
		return
	}
	close(p.h.gone)
	p.h.s.Close()
	p.h = nil
}

// question writes one request and waits for its n answers.
// Answers owed to earlier questions are skipped first. A caller that
// gives up (ctx cancelled, not past its deadline) leaves its answers owed.
func (h *helper) question(ctx context.Context, req string, n int) ([]helperAnswer, error) {
	for h.owed > 0 {
		select {
		case _, ok := <-h.answers:
			if !ok {
				return nil, errors.New("the helper ended")
			}
			h.owed--
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, fmt.Errorf("%w: %w", errGaveUp, ctx.Err())
			}
			return nil, fmt.Errorf("no answer from the helper: %w", ctx.Err())
		}
	}
	if _, err := h.ask.Write([]byte(req)); err != nil {
		return nil, fmt.Errorf("ask the helper: %w", err)
	}
	var all []helperAnswer
	for len(all) < n {
		select {
		case a, ok := <-h.answers:
			if !ok {
				return nil, errors.New("the helper ended")
			}
			all = append(all, a)
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				h.owed += n - len(all)
				return nil, fmt.Errorf("%w: %w", errGaveUp, ctx.Err())
			}
			return nil, fmt.Errorf("no answer from the helper: %w", ctx.Err())
		}
	}
	return all, nil
}

// openHelper starts helperScript on its own channel and waits for its
// ready byte.
func (c *conn) openHelper(ctx context.Context) (*helper, error) {
	var (
		ask io.WriteCloser
		out *bufio.Reader
	)
	s, err := c.openSession(ctx, func(s *ssh.Session) error {
		var err error
		if ask, err = s.StdinPipe(); err != nil {
			return err
		}
		stdout, err := s.StdoutPipe()
		if err != nil {
			return err
		}
		out = bufio.NewReader(stdout)
		// bash without rc files: started by the login's shell, which read
		// its rc, this bash reads none (and, as SHLVL is 2 now, not the
		// rc that bash reads for sshd either).
		if err := s.Start("exec bash --norc --noprofile -c " + shellQuote(helperScript) + " tandem-helper"); err != nil {
			return err
		}
		// Skip what the login's rc printed, up to the ready byte.
		for {
			b, err := out.ReadByte()
			if err != nil {
				return fmt.Errorf("the helper did not start: %w", err)
			}
			if b == helperReady[0] {
				return nil
			}
		}
	})
	if err == nil && !c.track() {
		s.Close()
		err = net.ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("start helper: %w", err)
	}
	h := &helper{s: s, ask: ask, answers: make(chan helperAnswer), gone: make(chan struct{})}
	go func() {
		defer c.wg.Done()
		defer close(h.answers)
		var a helperAnswer
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, " "):
				a.data = append(a.data, unescapeHelper(line[1:]))
				continue
			case line == "ok":
			case strings.HasPrefix(line, "err"):
				a.err = strings.TrimSpace(strings.TrimPrefix(line, "err"))
				if a.err == "" {
					a.err = "failed"
				}
			default:
				a.err = fmt.Sprintf("unexpected line %q", line)
			}
			// An answer owed to a caller that gave up waits for the next
			// question, or for the conn's end: Close waits for this
			// goroutine.
			select {
			case h.answers <- a:
			case <-h.gone:
				return
			case <-c.life.Done():
				return
			}
			a = helperAnswer{}
		}
	}()
	return h, nil
}

// unescapeHelper undoes the helper's escaping of \ and newline.
func unescapeHelper(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == 'n' {
				b.WriteByte('\n')
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// helperFile reads /proc/PID/NAME (stat, status, comm or cmdline) through the
// helper. A cmdline comes back with a NUL after each
// argument, as the kernel gives it; the other files with a newline after
// each line.
func (c *conn) helperFile(ctx context.Context, pid int, name string) ([]byte, error) {
	a, err := c.question(ctx, name, pid, "")
	if err != nil {
		return nil, err
	}
	if a.err != "" {
		return nil, fmt.Errorf("sshconn: shell %d: /proc/%d/%s: %s", pid, pid, name, a.err)
	}
	sep := "\n"
	if name == "cmdline" {
		sep = "\x00"
	}
	var b strings.Builder
	for _, l := range a.data {
		b.WriteString(l)
		b.WriteString(sep)
	}
	return []byte(b.String()), nil
}
