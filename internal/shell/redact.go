package shell

import (
	"io"

	"github.com/tandem-sh/tandem/internal/redact"
)

// Redactions counts the secrets replaced by markers in a command's
// streams (Options.Redact): what the agent reads holds a marker
// [REDACTED:kind] in place of each. A human's command has Stdout only.
type Redactions struct {
	Stdout int
	Stderr int
}

// Total is the number of markers in both streams.
func (r Redactions) Total() int { return r.Stdout + r.Stderr }

// sinkFunc is an io.Writer made of a function: where a redacting stream
// releases what it has decided. It never fails.
type sinkFunc func(p []byte)

func (f sinkFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

// outStream is one captured stream of a command on its way to the spool:
// through the session's redactor, when it has one, which holds back a
// possible secret's start until the rest arrives (so a secret split across
// two reads is caught) and releases the rest to w at once.
type outStream struct {
	w   io.Writer
	red *redact.Stream
	raw RawSink // the exact bytes, for the operator (Options.Raw); nil: none
}

// RawSink keeps the exact bytes of a stream whose readable copy is
// redacted, where only the operator can read them back (see Options.Raw).
type RawSink interface {
	io.Writer
	// Close ends the stream; keep is false when nothing in it was
	// redacted, so the exact bytes are the readable ones.
	Close(keep bool) error
}

// refreshRedact has the redactor take the secret files written since it
// last looked: they count from the next command on. It runs once as each
// command starts, the agent's before the shell's lock is taken, and as a
// human's command ends (for its line); streams made later pick it up.
func (s *Shell) refreshRedact() {
	if s.opts.Redact == nil {
		return
	}
	if err := s.opts.Redact.Refresh(); err != nil {
		s.log.Warn("a secret file changed and cannot be used; the values read before stay redacted", "err", err)
	}
}

// newOut returns the stream that writes to w what the agent may read;
// name names the stream's spool file.
func (s *Shell) newOut(w io.Writer, name string) *outStream {
	o := &outStream{w: w}
	if s.opts.Redact != nil {
		o.red = s.opts.Redact.Stream(w)
		if s.opts.Raw != nil {
			o.raw = s.opts.Raw(name)
		}
	}
	return o
}

// Write passes p on, redacted. It never fails: capture never stops the shell.
func (o *outStream) Write(p []byte) (int, error) {
	if o.raw != nil {
		_, _ = o.raw.Write(p)
	}
	if o.red != nil {
		_, _ = o.red.Write(p)
		return len(p), nil
	}
	_, _ = o.w.Write(p)
	return len(p), nil
}

// end releases what the redactor still holds, the stream being complete,
// and returns how many markers it wrote.
func (o *outStream) end() int {
	if o == nil || o.red == nil {
		return 0
	}
	_ = o.red.Flush()
	n := o.red.Counts().Total()
	if o.raw != nil {
		_ = o.raw.Close(n > 0)
		o.raw = nil
	}
	return n
}

// count is how many markers the stream has written so far.
func (o *outStream) count() int {
	if o == nil || o.red == nil {
		return 0
	}
	return o.red.Counts().Total()
}

// redactText replaces the secrets in a text the agent will read whole: a
// human's command line, a half-typed line, the line a command waits at.
func (s *Shell) redactText(t string) string {
	if s.opts.Redact == nil || t == "" {
		return t
	}
	t, _ = s.opts.Redact.String(t)
	return t
}

// viewStream starts the redaction of what viewers and the recording see,
// when the session has a redactor for them (Options.ViewRedact).
func (s *Shell) viewStream() {
	red := s.opts.ViewRedact
	if red == nil {
		return
	}
	s.viewRed = red.Stream(sinkFunc(s.showRedacted))
	if in := s.opts.Input; in != nil {
		s.inputRed = red.Stream(sinkFunc(in))
	}
}

// redactArgs is argv as a command's record keeps it for the agent: each
// argument redacted (a token passed on a command line). The judge sees
// the exact argv; argv is never changed in place.
func (s *Shell) redactArgs(argv []string) []string {
	if s.opts.Redact == nil {
		return argv
	}
	var out []string
	for i, a := range argv {
		r := s.redactText(a)
		if r != a && out == nil {
			out = append(make([]string, 0, len(argv)), argv[:i]...)
		}
		if out != nil {
			out = append(out, r)
		}
	}
	if out == nil {
		return argv
	}
	return out
}
