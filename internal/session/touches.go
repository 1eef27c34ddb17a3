package session

import (
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
)

// A human's keys in the agent's running command (an answer at its prompt,
// a Ctrl-C) are the agent's business as much as the human's own commands
// are: the shell tells each piece of such input (shell.Touch), the session
// gathers them per command and viewer, and the next reply that names the
// session takes them, once (TakeTouches), like the gate's commands.

// Touch is what one viewer did to one of the agent's commands since the
// agent was last told: how many keys they typed into it, and the interrupt
// key they pressed, if any. It never holds the keys (see shell.Touch).
type Touch struct {
	CommandID string
	Command   string
	Viewer    string
	// Keys counts the bytes typed (a key such as an arrow sends several);
	// Enters the line ends among them.
	Keys, Enters int
	// Masked: some of the keys were typed where the terminal hid them (a
	// password prompt), or tandem could not tell.
	Masked bool
	// Interrupt is the last interrupt key pressed: "Ctrl-C", "Ctrl-Z" or
	// "Ctrl-\\"; "" if none was.
	Interrupt string
	// At is when the first key came, Last when the latest did.
	At, Last time.Time
}

// maxTouches bounds the touches a session holds for its agent: past it,
// the oldest go (a viewer typing into many of the agent's commands while
// the agent never calls again).
const maxTouches = 64

// touched files one piece of a viewer's input into the agent's command;
// the shell's lock is held.
func (s *Session) touched(t shell.Touch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touches = mergeTouch(s.touches, t)
	s.lastActivity = time.Now()
}

// mergeTouch adds t to ts: to the entry of the same command and viewer,
// or as a new one.
func mergeTouch(ts []Touch, t shell.Touch) []Touch {
	var e *Touch
	for i := range ts {
		if ts[i].CommandID == t.CommandID && ts[i].Viewer == t.Viewer {
			e = &ts[i]
			break
		}
	}
	if e == nil {
		if len(ts) == maxTouches {
			ts = ts[1:]
		}
		ts = append(ts, Touch{CommandID: t.CommandID, Command: t.Command, Viewer: t.Viewer, At: t.At})
		e = &ts[len(ts)-1]
	}
	e.Keys += t.Keys
	e.Enters += t.Enters
	e.Masked = e.Masked || t.Masked
	e.Last = t.At
	if t.Interrupt != "" {
		e.Interrupt = t.Interrupt
	}
	return ts
}

// TakeTouches returns what viewers did to the agent's commands since the
// last take, oldest first, and forgets it: each touch is told once.
func (s *Session) TakeTouches() []Touch {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.touches
	s.touches = nil
	return ts
}
