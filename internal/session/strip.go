package session

import "time"

// Denial is one action the policy refused in the session, for the
// monitoring page: what was refused and by which rule.
type Denial struct {
	Tool    string
	Command string
	Rule    string
	At      time.Time
}

// maxDenials is how many of a session's latest denials it keeps.
const maxDenials = 5

// NoteDenied keeps a refused action for the monitoring page, and tells
// the watchers.
func (s *Session) NoteDenied(d Denial) {
	s.mu.Lock()
	s.denied = append(s.denied, d)
	if n := len(s.denied); n > maxDenials {
		s.denied = append([]Denial(nil), s.denied[n-maxDenials:]...)
	}
	s.mu.Unlock()
	s.changed()
}

// Denied lists the session's latest denials, oldest first.
func (s *Session) Denied() []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Denial(nil), s.denied...)
}

// GateCount is how many of the human's commands the agent will be told
// of before it acts again.
func (s *Session) GateCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
