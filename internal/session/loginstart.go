package session

import "time"

// LoginStart is how long the session's shell took from its start to its
// first prompt (see shell.Shell.StartTook), the login's startup files
// included, so ssh_connect can report a slow one.
func (s *Session) LoginStart() time.Duration { return s.sh.StartTook() }
