package web

import (
	"errors"
	"net/http"
	"os"
	"syscall"
	"time"
)

// castType is the media type asciinema registers for asciicast files.
const castType = "application/x-asciicast"

// recording returns the name and path of the recording of the ended session
// with key, if there is one and its file is there to serve.
func (s *Server) recording(key string) (name, path string, ok bool) {
	if s.recordings == nil {
		return "", "", false
	}
	name, path, ok = s.recordings.Recording(key)
	if !ok {
		return "", "", false
	}
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err != nil {
		s.log.Warn("web: recording not servable", "path", path, "err", err)
		return "", "", false
	}
	return name, path, true
}

// serveCast sends the recording of an ended session, for the replay page's
// script to play; its input events only to the signed-in operator. A key
// without a recording is not found, like any other.
func (s *Server) serveCast(w http.ResponseWriter, r *http.Request) {
	_, path, ok := s.recording(r.PathValue("key"))
	if !ok {
		s.serveNotFound(w, r)
		return
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		s.log.Warn("web: recording not servable", "path", path, "err", err)
		s.serveNotFound(w, r)
		return
	}
	defer f.Close()
	if !s.operatorRequest(r) {
		s.serveCastWithoutInput(w, r, f) // castinput.go
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", castType)
	hd.Set("Cache-Control", "no-store")
	// A zero modification time keeps Last-Modified and conditional requests
	// out of it: nothing about this response is to be cached.
	http.ServeContent(w, r, "", time.Time{}, f)
}
