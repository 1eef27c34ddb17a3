package redact

// ParseSecretFile exposes parseSecretFile to the black-box tests.
var ParseSecretFile = parseSecretFile

// Held reports how many bytes the stream holds back, unwritten.
func (s *Stream) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf) - s.emitted
}
