package transfer

import (
	"errors"
	"fmt"
)

// Sentinels that every error of this package wraps where one applies, so
// callers (the mcp layer, the web page) map them to stable codes.
var (
	// ErrNotFound: the file (or a parent directory, for a download) does
	// not exist.
	ErrNotFound = errors.New("no such file")
	// ErrExists: an upload without overwrite names an existing file.
	ErrExists = errors.New("file exists")
	// ErrTooLarge: the content passed the size limit; nothing was kept.
	ErrTooLarge = errors.New("file too large")
	// ErrEscapes: the path, or a symlink on it, leads out of the
	// workspace.
	ErrEscapes = errors.New("path leads out of the workspace")
	// ErrIsDir: the path names a directory where a file is needed.
	ErrIsDir = errors.New("is a directory")
	// ErrNotRegular: the path names a device, FIFO or socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrBadPath: the path is empty or holds a NUL byte.
	ErrBadPath = errors.New("invalid path")
	// ErrDenied: the session's side refused the operation (permissions,
	// or the sandbox's rules).
	ErrDenied = errors.New("permission denied")
	// ErrUnavailable: the session cannot serve files (its backend has no
	// file channel, or the channel failed to start).
	ErrUnavailable = errors.New("file transfer unavailable")
)

// PathError is an error about one path: Op is "upload", "download" or
// "resolve", Path the path as the caller gave it, Rule what refused it
// in words a person reads ("the path's symlink \"out\" leads to /etc").
type PathError struct {
	Op   string
	Path string
	Rule string
	Err  error
}

func (e *PathError) Error() string {
	if e.Rule != "" {
		return fmt.Sprintf("%s %q: %v: %s", e.Op, e.Path, e.Err, e.Rule)
	}
	return fmt.Sprintf("%s %q: %v", e.Op, e.Path, e.Err)
}

func (e *PathError) Unwrap() error { return e.Err }

// LimitError is the ErrTooLarge of a copy: Limit is the rule's number of
// bytes, Name the setting that holds it (e.g. "limits.uploadBytes").
type LimitError struct {
	Limit int64
	Name  string
}

func (e *LimitError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%v: more than %d bytes (%s)", ErrTooLarge, e.Limit, e.Name)
	}
	return fmt.Sprintf("%v: more than %d bytes", ErrTooLarge, e.Limit)
}

func (e *LimitError) Unwrap() error { return ErrTooLarge }
