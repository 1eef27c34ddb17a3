package shell

import (
	"slices"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// Who a process of the shell's tree belongs to is decided by when the
// shell forked its ancestor (execguard.Trace): the Shell keeps, in
// s.ledger, the spans during which it ran a person's command, from the
// viewer's Enter that submitted it to its end, and an agent's, from the
// accept key to its end. The ends are when tandem read them, later than
// the shell's own: a line a person typed ahead, which the shell runs the
// moment the agent's command ends, may start inside the agent's span and
// is then the agent's (a tie goes to the agent).

// running lists the spans of the commands that run now; s.mu is held.
// An agent's line runs from its accept key on; a person's from the Enter
// that submitted it (none for a line no viewer's Enter explains).
func (s *Shell) running() []execguard.Span {
	var out []execguard.Span
	if a := s.agent; a != nil && a.phase >= phaseAccepted && a.phase != phaseDone {
		out = append(out, execguard.Span{Owner: execguard.Agent, From: a.rec.Started})
	}
	if h := s.human; h != nil && !h.entered.IsZero() {
		out = append(out, execguard.Span{Owner: execguard.Human, From: h.entered})
	}
	return out
}

// forkedSinceEnter reports whether a process of origin o was forked after
// the oldest Enter a viewer sent that no command has used yet: it may be
// the first program of that line, which the terminal reader has not seen
// start yet. Enters gone stale (most likely read by a program) do not
// count, so that an agent's background job is not held for them; s.mu is
// held.
func (s *Shell) forkedSinceEnter(o execguard.Origin) bool {
	if !o.Known {
		return false
	}
	var enter time.Time
	switch {
	case len(s.typed) > 0 && s.typedOK:
		enter = s.typedBy.at
	case len(s.credits) > 0 && time.Now().Before(s.creditsStaleAt()):
		enter = s.credits[0].at
	default:
		return false
	}
	return (&execguard.Ledger{}).Human(o, execguard.Span{Owner: execguard.Human, From: enter})
}

// ended files a finished command's span (from is its start, zero for none)
// and the exit statuses of its programs that the backend has seen end;
// s.mu is held, and rec is about to be final.
func (s *Shell) ended(owner execguard.Owner, from time.Time, rec *Record) {
	if !from.IsZero() {
		s.ledger.Add(execguard.Span{Owner: owner, From: from, To: time.Now()})
	}
	if len(rec.Execs) == 0 {
		return
	}
	if es, ok := s.conn.(ExitSyncer); ok {
		es.SyncExits()
	}
	// A copy: readers of the running record share the old array.
	execs := slices.Clone(rec.Execs)
	for i := range execs {
		if execs[i].exit == nil {
			continue
		}
		if st := execs[i].exit.Load(); st != nil {
			if st.Signal != "" {
				execs[i].Signal = st.Signal
			} else {
				execs[i].ExitCode = &st.Code
			}
		}
		execs[i].exit = nil
	}
	rec.Execs = execs
}
