package redact

// ParseSecretFile exposes parseSecretFile to the black-box tests.
var ParseSecretFile = parseSecretFile

// Held reports how many bytes the stream holds back, unwritten.
func (s *Stream) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf) - s.emitted
}

// MaxBefore exposes maxBefore to the black-box tests.
const MaxBefore = maxBefore

// KeptBefore reports how many earlier values of its files r keeps.
func KeptBefore(r *Redactor) int {
	r.files.mu.Lock()
	defer r.files.mu.Unlock()
	return len(r.files.before)
}
