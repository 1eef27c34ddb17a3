package shell

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"
)

// Background output. An agent command's stdout and stderr are a pair of
// FIFOs, and a background job it starts (cmd &) keeps writing to them
// after the command ends. What arrives on a pair while no command of the
// agent's captures it, or on a pair no longer in use, is background
// output: it goes to a record of its own (TakeBackground), never into a
// later command's output. Once a command leaves such a job behind (the
// shell says so: $! moved), or output shows up between commands, the next
// command gets a new pair, so the job can never write into it.

// PairOpener is implemented by a Conn that can open more output FIFO
// pairs in the shell's run dir: "out."+name and "err."+name, which the
// shell created and holds open. Without it, background output is still
// kept apart between commands, but not while a later command runs.
type PairOpener interface {
	OpenPair(ctx context.Context, dir, name string) (stdout, stderr io.ReadCloser, err error)
}

// maxPairs bounds the FIFO pairs of one shell; past it, commands share
// the last one.
const maxPairs = 64

// pair is one relay FIFO pair: 0 is the relay's own.
type pair struct {
	eof   int  // streams read to their end
	ready bool // its readers run (or failed to start)
	err   error
}

// bgRun is background output not yet reported.
type bgRun struct {
	rec Record
	out [2]*outStream // redact into rec's files
}

// background files bytes of a stream no command captures; s.mu is held.
func (s *Shell) background(stream int, p []byte) {
	if len(p) == 0 {
		return
	}
	if s.bg == nil {
		id := "bg_" + newCommandID()[len("cmd_"):]
		b := &bgRun{rec: Record{ID: id, Source: "background", Command: "output of background jobs", Started: time.Now(),
			Stdout: s.opts.Spool.New(id + ".stdout"), Stderr: s.opts.Spool.New(id + ".stderr")}}
		b.out[0], b.out[1] = s.newOut(b.rec.Stdout, id+".stdout"), s.newOut(b.rec.Stderr, id+".stderr")
		s.bg = b
	}
	_, _ = s.bg.out[stream].Write(p)
}

// TakeBackground returns the background output since the last call, as a
// finished record that can be read back like any command's, and starts a
// new one; ok is false when there was none.
func (s *Shell) TakeBackground() (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bg
	if b == nil {
		return Record{}, false
	}
	s.bg = nil
	b.rec.Duration = time.Since(b.rec.Started)
	b.rec.Redacted = Redactions{Stdout: b.out[0].end(), Stderr: b.out[1].end()}
	_ = b.rec.Stdout.Close()
	_ = b.rec.Stderr.Close()
	return b.rec, true
}

// nextPair is the pair a new agent line should get, or 0 to keep the
// current one; s.mu is held.
func (s *Shell) nextPair() int {
	if !s.rotate || len(s.pairs) >= maxPairs {
		return 0
	}
	if _, ok := s.conn.(PairOpener); !ok {
		return 0
	}
	return len(s.pairs)
}

// switchPair follows the shell to pair n, which it says it now writes
// agent lines to, and starts reading it; s.mu is held.
func (s *Shell) switchPair(n int) {
	if n == s.cur || n <= 0 || n > len(s.pairs) || n >= maxPairs {
		return
	}
	if n == len(s.pairs) {
		s.pairs = append(s.pairs, &pair{})
		go s.openPair(n)
	}
	s.cur, s.rotate = n, false
}

// openPair connects the readers of pair n.
func (s *Shell) openPair(n int) {
	ctx, cancel := context.WithTimeout(context.Background(), relayOpenTimeout)
	defer cancel()
	out, errs, err := s.conn.(PairOpener).OpenPair(ctx, s.rundir, strconv.Itoa(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.changed.Broadcast()
	p := s.pairs[n]
	p.ready, p.err = true, err
	if err != nil {
		s.log.Error("shell: open output FIFOs", "pair", n, "err", err)
		return
	}
	if s.closed {
		_ = out.Close()
		_ = errs.Close()
		return
	}
	s.pairReaders = append(s.pairReaders, out, errs)
	go s.readRelay(out, n, 0)
	go s.readRelay(errs, n, 1)
}

// mayBackground reports whether a command line may leave a process behind
// that writes to its output after it ends: a lone '&' (not &&, >&, &>,
// <&, |&), or a program made for that. A wrong yes costs only a new FIFO
// pair; bash itself reports jobs started with & ($!), and output between
// commands is caught as it comes.
func mayBackground(cmd string) bool {
	for i := 0; i < len(cmd); i++ {
		if cmd[i] != '&' {
			continue
		}
		prev, next := byte(0), byte(0)
		if i > 0 {
			prev = cmd[i-1]
		}
		if i+1 < len(cmd) {
			next = cmd[i+1]
		}
		if next == '&' {
			i++ // &&
			continue
		}
		if prev == '>' || prev == '<' || prev == '|' || next == '>' {
			continue
		}
		return true
	}
	for _, w := range []string{"nohup", "setsid", "disown", "daemon", "start-stop-daemon"} {
		if strings.Contains(cmd, w) {
			return true
		}
	}
	return false
}
