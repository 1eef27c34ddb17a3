package web

import (
	"context"
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
	s.serveCastFile(w, r, path, s.operatorRequest(r))
}

// serveCastFile sends the recording at path; its input events only when
// operator says the operator asks.
func (s *Server) serveCastFile(w http.ResponseWriter, r *http.Request, path string, operator bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		s.log.Warn("web: recording not servable", "path", path, "err", err)
		s.serveNotFound(w, r)
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		s.log.Warn("web: recording not servable", "path", path, "err", err)
		s.serveNotFound(w, r)
		return
	}
	if !operator {
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

// operatorReplay returns the name and path of the recording of the ended
// session id, for the signed-in operator (cookie or bearer token) only.
func (s *Server) operatorReplay(r *http.Request) (name, path string, ok bool) {
	if !s.operatorRequest(r) {
		return "", "", false
	}
	ctx, cancel := context.WithTimeout(r.Context(), listTimeout)
	defer cancel()
	return s.operator.Replays.Replay(ctx, r.PathValue("id"))
}

// serveOperatorReplay answers GET /replays/{id}: the replay page of an
// ended session, found by its id, for the operator alone. Anyone else gets
// the sign-in page, whatever the id: it tells nothing about sessions.
func (s *Server) serveOperatorReplay(w http.ResponseWriter, r *http.Request) {
	if !s.operatorRequest(r) {
		s.render(w, http.StatusUnauthorized, "signin.html", struct{ Wrong bool }{false})
		return
	}
	name, _, ok := s.operatorReplay(r)
	if !ok {
		s.serveNotFound(w, r)
		return
	}
	s.render(w, http.StatusOK, "replay.html", struct{ Name string }{name})
}

// serveOperatorCast answers GET /replays/{id}/cast, the recording the
// replay page plays, with its input events: for the operator alone, not
// found for anyone else, as an unknown id is.
func (s *Server) serveOperatorCast(w http.ResponseWriter, r *http.Request) {
	_, path, ok := s.operatorReplay(r)
	if !ok {
		s.serveNotFound(w, r)
		return
	}
	s.serveCastFile(w, r, path, true)
}
