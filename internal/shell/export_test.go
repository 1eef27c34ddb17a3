package shell

// MayBackground exposes mayBackground to the black-box tests.
var MayBackground = mayBackground

// Staging reports whether an agent line waits for the shell to read its
// stage key.
func (s *Shell) Staging() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agent != nil && s.agent.phase == phaseStaging
}

// AtIdlePrompt reports whether the shell's prompt is drawn and idle.
func (s *Shell) AtIdlePrompt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.idlePrompt()
}
