package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/session"
)

// The hand-back: the agent asks for the human at the keyboard, and the
// call answers once the human hands the session back.
const (
	// requestHumanWaitMax keeps one call under the clients' request
	// timeout; the agent repeats the call with requestId to wait on.
	requestHumanWaitMax = 50 * time.Second
	// messageMax bounds the agent's message to the human.
	messageMax = 2 << 10
)

type requestHumanArgs struct {
	SessionName  string   `json:"sessionName"`
	SessionToken string   `json:"sessionToken"`
	Message      string   `json:"message"`
	RequestID    string   `json:"requestId"`
	WaitSeconds  *float64 `json:"waitSeconds"`
}

func (a requestHumanArgs) callTimeout() time.Duration {
	return waitArg(a.WaitSeconds, requestHumanWaitMax)
}

// requestHuman asks for the human at the keyboard of the session (a
// password, a 2FA code, an interactive login, a decision) and waits until
// they hand it back, or answers human_pending with the requestId to wait
// on again. While the request is open the session is the human's.
func (s *Server) requestHuman(ctx context.Context, c session.Caller, a requestHumanArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if a.WaitSeconds != nil && (*a.WaitSeconds < 0 || *a.WaitSeconds > requestHumanWaitMax.Seconds()) {
		return nil, invalidArg("waitSeconds", "must be between 0 and %g", requestHumanWaitMax.Seconds())
	}
	msg := strings.TrimSpace(a.Message)
	if a.RequestID == "" {
		switch {
		case msg == "":
			return nil, invalidArg("message", "is empty: say what you need the human to do, e.g. \"Enter the sudo password for apt install\"")
		case len(msg) > messageMax || !utf8.ValidString(msg):
			return nil, invalidArg("message", "must be valid UTF-8 of at most %d bytes", messageMax)
		}
	}
	if err := s.authorize(ctx, c, "ssh_request_human", sess.Target.Name, sessionAction(c, sess, "ssh_request_human", msg)); err != nil {
		return nil, err
	}
	id := a.RequestID
	if id == "" {
		// The agent first learns what the human did already.
		if err := sess.Gate(); err != nil {
			return nil, err
		}
		r, _ := sess.RequestHuman(msg)
		id = r.ID
	} else if _, ok := sess.HumanRequestOf(id); !ok {
		return nil, fail(codeInvalidArguments, fmt.Sprintf("Session '%s' has no open request %q for the human: it was answered already, or never made. Call ssh_request_human with a message to ask again.", sess.Name, id),
			reply{"field": "requestId"})
	}
	prog := startProgress(ctx, s.heartbeat())
	defer prog.finish()
	r, gate, done, err := sess.AwaitHandBack(ctx, id, a.callTimeout(), prog.waitNotes(ctx, s.heartbeat(), "for the human to hand the session back"))
	switch {
	case errors.Is(err, session.ErrNoHumanRequest):
		return nil, fail(codeInvalidArguments, fmt.Sprintf("The request %q for the human was answered by another call.", id), reply{"field": "requestId"})
	case err != nil:
		return nil, err
	case !done:
		return nil, fail(codeHumanPending, fmt.Sprintf("The human has not handed the session back yet (asked %s ago: %q). The session is theirs until then: your calls that act on it answer session_busy. Call ssh_request_human again with this requestId to keep waiting; reads still work.",
			time.Since(r.Since).Round(time.Second), r.Message), reply{"requestId": id, "requestedAt": r.Since.UTC().Format(time.RFC3339Nano)})
	}
	out := reply{"requestId": id, "handedBackBy": r.By, "handedBackAt": r.At.UTC().Format(time.RFC3339Nano), "userCommandCount": 0}
	if r.Note != "" {
		out["note"] = r.Note
	}
	if gate != nil {
		for k, v := range s.gateFields(c, gate) {
			out[k] = v
		}
	}
	return ok(out), nil
}

// humanRequestedFailure refuses a call that would act on the shell while
// the human holds it at the agent's request.
func humanRequestedFailure(e *session.HumanRequestedError) *failure {
	return fail(codeBusy, fmt.Sprintf("The session is the human's: you asked for them (%q) and they have not handed it back yet. Call ssh_request_human with requestId to wait for them; ssh_read_output and ssh_list_sessions still work.", e.Request.Message),
		reply{"reason": "human_requested", "requestId": e.Request.ID, "requestedAt": e.Request.Since.UTC().Format(time.RFC3339Nano)})
}
