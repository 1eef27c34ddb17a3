package session

import (
	"context"
	"time"
)

// WaitOutput waits as WaitCommand does, and also ends as soon as the
// agent's running command id is known to wait for input or to show a
// full-screen program (see shell.Shell.WaitAgent): a read that waits for
// more output need not wait out its time for a command that will print
// nothing until someone types. settled reports that, with st.
func (s *Session) WaitOutput(ctx context.Context, id string, d time.Duration, cond func(rec Record, done bool) bool) (st InputState, settled bool) {
	return s.sh.WaitAgent(ctx, id, d, func() bool {
		rec, done, ok := s.Command(id)
		return !ok || cond(rec, done)
	})
}
