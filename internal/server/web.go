package server

import (
	"context"

	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/web"
)

// webSessions lets the browser terminal open a session by capability key.
type webSessions struct{ m *session.Manager }

// Terminal opens the live session a capability key names.
func (w webSessions) Terminal(key string) (web.Terminal, bool) {
	s, ok := w.m.ByMonitorKey(key)
	if !ok {
		return nil, false
	}
	return webTerminal{s}, true
}

type webTerminal struct{ *session.Session }

// Name is the session's name, shown (escaped) on the page.
func (t webTerminal) Name() string { return t.Session.Name }

// Input types a viewer's keys, named for the records of what they run.
func (t webTerminal) Input(ctx context.Context, p []byte) error {
	return t.Session.Input(session.WithViewer(ctx, web.ViewerFrom(ctx)), p)
}

// Owner names the tenant and actor of an HTTP-mode session for the page;
// a stdio session (no actor) shows none.
func (t webTerminal) Owner() string {
	c := t.Session.Caller()
	if c.Actor == "" {
		return ""
	}
	return c.Tenant + " · " + c.Actor
}

// HumanRequest is the agent's open request for the human, for the page.
func (t webTerminal) HumanRequest() (id, message string, ok bool) {
	r, ok := t.Session.OpenHumanRequest()
	return r.ID, r.Message, ok
}

// HandBack ends the agent's request for the human, from the page.
func (t webTerminal) HandBack(ctx context.Context, id, note string) error {
	return t.Session.HandBack(id, note, web.ViewerFrom(ctx))
}

var _ web.HumanDesk = webTerminal{}
