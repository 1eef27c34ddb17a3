package server

import (
	"context"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/web"
)

// webSessions lets the browser terminal open a session by capability key.
type webSessions struct {
	m      *session.Manager
	broker *approval.Broker
	files  *humanFiles
}

// Terminal opens the live session a capability key names.
func (w webSessions) Terminal(key string) (web.Terminal, bool) {
	s, ok := w.m.ByMonitorKey(key)
	if !ok {
		return nil, false
	}
	return webTerminal{s, w.m, w.broker, w.files}, true
}

// webTerminal is one live session as its monitoring page sees it: the
// terminal, the agent's request for the human, and the status strip.
type webTerminal struct {
	*session.Session
	m      *session.Manager
	broker *approval.Broker
	files  *humanFiles // the page's uploads and downloads (webfiles.go)
}

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
	return r.ID, t.forViewers(r.Message), ok
}

// forViewers is text as every viewer of the page sees it: with the
// session's secrets redacted when its target hides them from viewers
// (redact.viewers), and the credentials tandem holds for it always, as
// the terminal and the recording are. The watch link is the agent's
// too, so nothing on the page may hold more than the terminal does.
func (t webTerminal) forViewers(text string) string {
	if red := t.Session.Target.ViewRedact(); red != nil && text != "" {
		text, _ = red.String(text)
	}
	return text
}

// HandBack ends the agent's request for the human, from the page.
func (t webTerminal) HandBack(ctx context.Context, id, note string) error {
	return t.Session.HandBack(id, note, web.ViewerFrom(ctx))
}

// WatchHumanRequest signals fn when the session's request for the human
// (or anything else the page shows of it) changes.
func (t webTerminal) WatchHumanRequest(fn func()) (stop func()) { return t.Session.Changes(fn) }

// Status is what the page's strip shows: what the agent does now, the
// approvals it waits for, what the policy refused, and how many of the
// human's commands the agent will be told of before it acts.
func (t webTerminal) Status() web.SessionStatus {
	st := web.SessionStatus{Agent: "idle", Gate: t.Session.GateCount()}
	i := t.Session.Info()
	for _, c := range t.Session.Recent(stripCommands) {
		sc := web.StripCommand{ID: c.ID, Source: "agent", Command: c.Command, Running: c.Running}
		if c.Source == "user" {
			sc.Source = "human"
		}
		if !c.Running && c.ExitKnown {
			code := c.ExitCode
			sc.Exit = &code
		}
		st.Commands = append(st.Commands, sc)
	}
	if l := i.Last; l != nil && l.Running {
		st.Agent, st.Command, st.Since = "running", l.Command, l.Started
		if l.Source == "user" {
			st.Agent = "human_running"
		}
	}
	if r := i.HumanRequest; r != nil {
		st.Agent, st.Command, st.Since = "waiting_human", r.Message, r.Since
	}
	for _, a := range t.broker.Pending() {
		if a.Action.SessionID != t.Session.ID {
			continue
		}
		st.Approvals = append(st.Approvals, web.StripAction{ID: a.ID, Tool: a.Action.Tool, Command: a.Action.Command, Rule: a.Rule, Cwd: a.Action.Cwd, Expires: a.Expires})
		st.Agent, st.Command, st.Since = "waiting_approval", a.Action.Command, a.Created
	}
	for _, a := range t.broker.Held() {
		if a.Action.SessionID == t.Session.ID {
			st.Held = append(st.Held, web.StripAction{ID: a.ID, Tool: a.Action.Tool, Command: a.Action.Command, Rule: a.Rule, Expires: a.Expires})
		}
	}
	for _, d := range t.Session.Denied() {
		st.Denied = append(st.Denied, web.StripAction{Tool: d.Tool, Command: d.Command, Rule: d.Rule, At: d.At})
	}
	for _, c := range t.Session.RecentConnections(stripConnections) {
		st.Network = append(st.Network, web.StripConnection{Target: c.Target(), Decision: c.Decision, Reason: c.Reason, At: c.Started})
	}
	if t.Session.Target.ViewRedact() != nil {
		st = st.Redacted(t.forViewers)
	}
	return st
}

// stripConnections is how many connections the page names.
const stripConnections = 8

// stripCommands is how many of the latest commands the page marks.
const stripCommands = 20

// WatchStatus signals fn when the session, its approvals, or any
// session's commands change.
func (t webTerminal) WatchStatus(fn func()) (stop func()) {
	a, b, c := t.Session.Changes(fn), t.broker.Watch(fn), t.m.Changes(fn)
	return func() { a(); b(); c() }
}

var (
	_ web.HumanDesk = webTerminal{}
	_ web.Statuser  = webTerminal{}
)
