package shell

import (
	"context"
	"time"
)

// A call that waits for the agent's command (ssh_exec, ssh_read_output's
// waitSeconds) need not wait out its timeout once the outcome is known:
// the command waits for keys only the agent or the human can type, or a
// full-screen program holds the terminal. While such a call waits, a
// watcher looks at the command every settleEvery. A command is settled
// when two looks in a row, settleEvery apart, found it waiting for input
// with no output shown and no key typed between them, or found the
// alternate screen on (switched on by this command). A look is taken only
// when nothing was shown since the tick before: a command that printed
// "working..." and computes, or sleeps, is never blocked reading the
// terminal, and one that prints does not settle.

// settleEvery is the time between two looks at a running command; after
// each look that found it neither waiting nor full-screen the next comes
// twice as late, up to settleSlowest, and output brings it back: a long
// quiet command (a sleep, a build) is looked at once a second, which over
// SSH is a channel and a few forks on the server each time.
const (
	settleEvery   = 250 * time.Millisecond
	settleSlowest = time.Second
)

// settledState is what two agreeing looks found, with the marks that keep
// it true: the terminal's output end and the keys typed at that time.
type settledState struct {
	st       InputState
	end      int64 // s.live.End() when it was found
	agentSeq int
	humanSeq int
}

// settleMarks is what the watchers of one agent command found.
type settleMarks struct {
	found   *settledState
	based   bool // altBase is set (Exec claimed the command)
	altBase int  // s.alt.ons when the command was claimed
}

// fullScreenLocked reports whether a full-screen program of the agent
// command a shows: the alternate screen is on and was switched on since
// the command was claimed (a program killed on it earlier leaves it on).
// s.mu is held.
func (s *Shell) fullScreenLocked(a *agentRun) bool {
	return s.alt.on && (!a.settle.based || s.alt.ons != a.settle.altBase)
}

// settledLocked returns the settled state of the agent command a while it
// still holds: a prompt until anything is shown or typed, a full screen
// while the alternate screen is on. s.mu is held.
func (s *Shell) settledLocked(a *agentRun) (InputState, bool) {
	z := a.settle.found
	switch {
	case z == nil || s.agent != a || a.phase != phaseAccepted || s.lateInput:
		return InputState{}, false
	case z.st.FullScreen:
		return z.st, s.fullScreenLocked(a)
	}
	return z.st, z.end == s.live.End() && z.agentSeq == s.src.agentSeq && z.humanSeq == a.humanSeq
}

// look is one look's marks.
type look struct {
	end                int64
	agentSeq, humanSeq int
	full               bool
}

// watchSettle looks at the agent command a until it ends or stop is
// called, and records in a.settle, waking the shell's waiters, when it
// settles (see above). Each waiting call runs its own watcher.
func (s *Shell) watchSettle(a *agentRun) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		var (
			prev    *look
			lastEnd int64 = -1
			delay         = settleEvery
		)
		for {
			t.Reset(delay)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			if s.agent != a || a.phase > phaseAccepted {
				s.mu.Unlock()
				return
			}
			// Once the shell drew its next prompt the command is ending:
			// the shell, not the command, waits at it.
			ready := a.phase == phaseAccepted && a.started && !s.lateInput
			l := look{end: s.live.End(), agentSeq: s.src.agentSeq, humanSeq: a.humanSeq, full: s.fullScreenLocked(a)}
			last := lastLine(a.lastOut)
			s.mu.Unlock()
			quiet := l.end == lastEnd
			lastEnd = l.end
			if !ready || (!quiet && !l.full) {
				prev, delay = nil, settleEvery
				continue
			}
			st := InputState{FullScreen: l.full}
			s.probeInputCtx(ctx, &st, settleProbeMax)
			if !l.full && !(st.Known && st.WaitingForInput) {
				prev, delay = nil, min(2*delay, settleSlowest)
				continue
			}
			if prev == nil || prev.full != l.full || (!l.full && *prev != l) {
				prev, delay = &l, settleEvery
				continue
			}
			st.LastLine = s.redactText(last)
			s.mu.Lock()
			cur := look{end: s.live.End(), agentSeq: s.src.agentSeq, humanSeq: a.humanSeq, full: s.fullScreenLocked(a)}
			if s.agent == a && a.phase == phaseAccepted && (cur == l || (l.full && cur.full)) {
				a.settle.found = &settledState{st: st, end: l.end, agentSeq: l.agentSeq, humanSeq: l.humanSeq}
				s.changed.Broadcast()
			}
			s.mu.Unlock()
			prev = nil
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// probeInputCtx asks the backend whether the command waits for input
// (over SSH, from the shell's side, within bound and ctx) and, on a full
// screen, which program shows it.
func (s *Shell) probeInputCtx(ctx context.Context, st *InputState, bound time.Duration) {
	if w, ok := s.conn.(ShellInputWaiter); ok {
		if pid := s.PID(); pid > 0 {
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			if waiting, err := w.WaitingForInputOf(ctx, pid); err == nil {
				st.Known, st.WaitingForInput = true, waiting
			}
		}
	}
	s.probeConn(st)
}

// settleProbeMax bounds one look over SSH by a watcher.
const settleProbeMax = 3 * time.Second

// WaitAgent waits, as Wait does, until cond holds, ctx ends or d passes,
// and also ends as soon as the agent's running command id is known to
// wait for input or to show a full-screen program (see above), reporting
// what it does; settled is false when the wait ended otherwise. It is for
// a call that follows the command, such as a read of its output.
func (s *Shell) WaitAgent(ctx context.Context, id string, d time.Duration, cond func() bool) (st InputState, settled bool) {
	s.mu.Lock()
	a := s.agent
	if a == nil || a.rec.ID != id || a.phase > phaseAccepted {
		defer s.mu.Unlock()
		_ = s.waitUntil(ctx, d, cond)
		return InputState{}, false
	}
	s.mu.Unlock()
	stop := s.watchSettle(a)
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.waitUntil(ctx, d, func() bool {
		if cond() {
			settled = false
			return true
		}
		st, settled = s.settledLocked(a)
		return settled
	})
	return st, settled
}
