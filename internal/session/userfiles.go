package session

import "time"

// A file a human moved between their browser and the session's workspace
// (the monitoring page's upload and download) changes what the agent
// works with, or tells it what the human took away: the session keeps
// each such move, and the next reply that names the session takes them,
// once (TakeUserFiles), as it takes the touches of the agent's commands.

// UserFile is one file a viewer uploaded into the workspace or downloaded
// from it, not yet told to the agent. It never holds the file's bytes.
type UserFile struct {
	// Path is the file's path as the transfer named it.
	Path  string
	Bytes int64
	// SHA256 is the hex SHA-256 of the bytes moved.
	SHA256 string
	Viewer string
	// Direction is "upload" (into the workspace) or "download".
	Direction string
	At        time.Time
}

// The directions of a UserFile.
const (
	FileUpload   = "upload"
	FileDownload = "download"
)

// maxUserFiles bounds the moves a session holds for its agent: past it,
// the oldest go (a human moving many files while the agent never calls).
const maxUserFiles = 64

// FileMoved notes a file a viewer moved, for the agent's next reply.
func (s *Session) FileMoved(f UserFile) {
	s.mu.Lock()
	if len(s.userFiles) == maxUserFiles {
		s.userFiles = s.userFiles[1:]
	}
	s.userFiles = append(s.userFiles, f)
	s.lastActivity = time.Now()
	s.mu.Unlock()
	s.changed()
}

// TakeUserFiles returns the files viewers moved since the last take,
// oldest first, and forgets them: each is told once.
func (s *Session) TakeUserFiles() []UserFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.userFiles
	s.userFiles = nil
	return fs
}
