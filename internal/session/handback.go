package session

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HumanRequest is the agent's request for the human at the keyboard
// (ssh_request_human): a password, a 2FA code, an interactive login, a
// decision. While it is open the session is the human's: the agent's
// calls that act on the shell are refused with HumanRequestedError, and
// the human's commands wait for the hand-back instead of the gate.
type HumanRequest struct {
	ID      string
	Message string
	Since   time.Time
	// Set by the hand-back.
	HandedBack bool
	Note       string
	By         string // the viewer who handed back
	At         time.Time
}

// HumanRequestedError refuses an agent call that would act on the shell
// while the human holds the session at the agent's request.
type HumanRequestedError struct{ Request HumanRequest }

func (e *HumanRequestedError) Error() string {
	return fmt.Sprintf("session busy: the agent asked for the human (request %s) and the human has not handed back", e.Request.ID)
}

// ErrNoHumanRequest is a request id that names no request of the session
// (never made, or already answered).
var ErrNoHumanRequest = errors.New("no such request for the human in this session")

// maxNote bounds the human's note to the agent.
const maxNote = 4 << 10

// RequestHuman opens a request for the human, or returns the one already
// open (opened reports which): a session has one at a time.
func (s *Session) RequestHuman(message string) (r HumanRequest, opened bool) {
	s.mu.Lock()
	if s.request != nil {
		r = *s.request
		s.mu.Unlock()
		return r, false
	}
	s.request = &HumanRequest{ID: "hr_" + newID(), Message: message, Since: time.Now()}
	r = *s.request
	s.mu.Unlock()
	s.changed()
	return r, true
}

// OpenHumanRequest is the session's request for the human that has not
// been handed back; ok is false when there is none.
func (s *Session) OpenHumanRequest() (HumanRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.request == nil || s.request.HandedBack {
		return HumanRequest{}, false
	}
	return *s.request, true
}

// HumanRequestOf is the session's request id, open or handed back but not
// yet collected by the agent.
func (s *Session) HumanRequestOf(id string) (HumanRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.request == nil || s.request.ID != id {
		return HumanRequest{}, false
	}
	return *s.request, true
}

// HandBack ends the open request id: the human is done, and tells the
// agent note. by names the viewer.
func (s *Session) HandBack(id, note, by string) error {
	if len(note) > maxNote {
		return fmt.Errorf("the note is %d bytes; at most %d", len(note), maxNote)
	}
	s.mu.Lock()
	if s.request == nil || s.request.ID != id || s.request.HandedBack {
		s.mu.Unlock()
		return ErrNoHumanRequest
	}
	s.request.HandedBack, s.request.Note, s.request.By, s.request.At = true, note, by, time.Now()
	s.mu.Unlock()
	s.touch()
	s.changed()
	return nil
}

// AwaitHandBack waits up to d for the human to hand request id back. It
// reports whether they did; then the request is answered: the session is
// the agent's again, and the human's commands since the request (which
// the gate held back) are returned with it, never reported again.
func (s *Session) AwaitHandBack(ctx context.Context, id string, d time.Duration, onWait func(waited time.Duration)) (HumanRequest, *GateError, bool, error) {
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		r := s.request
		changed := s.requestCh
		if r == nil || r.ID != id {
			s.mu.Unlock()
			return HumanRequest{}, nil, false, ErrNoHumanRequest
		}
		if r.HandedBack {
			got := *r
			s.request = nil
			g, _ := s.tripLocked(true).(*GateError)
			s.mu.Unlock()
			s.changed()
			return got, g, true, nil
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return HumanRequest{}, nil, false, ctx.Err()
		case <-s.sh.Done():
			return HumanRequest{}, nil, false, s.wrapShellErr(s.sh.Err())
		case <-timer.C:
			s.mu.Lock()
			got := HumanRequest{}
			if s.request != nil {
				got = *s.request
			}
			s.mu.Unlock()
			return got, nil, false, nil
		case <-tick.C:
			if onWait != nil {
				onWait(time.Since(start))
			}
		case <-changed:
		}
	}
}

// humanHolds refuses an agent's action while a request for the human is
// open; s.mu is held.
func (s *Session) humanHoldsLocked() error {
	if s.request != nil && !s.request.HandedBack {
		return &HumanRequestedError{Request: *s.request}
	}
	return nil
}

// AgentMayAct is nil unless the human holds the session at the agent's
// request (HumanRequestedError).
func (s *Session) AgentMayAct() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.humanHoldsLocked()
}

// Changes calls fn (a signal, must not block) whenever the session's
// request for the human opens or ends, a denial is noted, or the gate
// takes a human command, until stop is called.
func (s *Session) Changes(fn func()) (stop func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqWatchers == nil {
		s.reqWatchers = map[int]func(){}
	}
	id := s.reqNext
	s.reqNext++
	s.reqWatchers[id] = fn
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.reqWatchers, id)
	}
}

// changed wakes the waiting call and tells the watchers and the
// manager (the dashboard).
func (s *Session) changed() {
	s.mu.Lock()
	if s.requestCh != nil {
		close(s.requestCh)
	}
	s.requestCh = make(chan struct{})
	fns := make([]func(), 0, len(s.reqWatchers))
	for _, fn := range s.reqWatchers {
		fns = append(fns, fn)
	}
	notify := s.notify
	s.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
	if notify != nil {
		notify()
	}
}
