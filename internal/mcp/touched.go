package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/session"
)

// touchedHint is the one sentence that explains agentCommandTouched.
const touchedHint = "A human in the browser terminal typed into a command of yours while it ran, or interrupted it, since your last reply: agentCommandTouched lists each (keys and enters count what they typed, which the command read unless it left it to the shell's next prompt, where userCommands reports what it ran; interruptKey is the key that interrupted it); read what the command did with ssh_read_output and its commandId."

// touchedCommandBytes bounds a touched command's text in a reply.
const touchedCommandBytes = 200

// addTouches reports, on the reply of any call that names a session, what
// viewers did to the agent's commands since the agent was last told: each
// touch once, whether or not the call that ran the command is still open.
// Each reported touch goes in the audit log too.
func (s *Server) addTouches(ctx context.Context, c session.Caller, info *call, r reply) {
	if info.sess == nil || r == nil || info.input != nil || info.raw != nil {
		return // a reply that is not sent tells nothing
	}
	ts := info.sess.TakeTouches()
	if len(ts) == 0 {
		return
	}
	defer func() { // it runs after the handler's own recover
		if p := recover(); p != nil {
			s.log.Error("reporting a human's touch panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	list := make([]any, 0, len(ts))
	for _, t := range ts {
		e := touchReply(t)
		if rec, done, ok := info.sess.Command(t.CommandID); ok {
			e["running"] = !done
			if done {
				e["exitCode"] = exitCode(rec)
			}
		}
		list = append(list, e)
		s.auditTouch(ctx, c, info, t)
	}
	r["agentCommandTouched"] = list
	r["agentCommandTouchedHint"] = touchedHint
}

// touchReply renders one touch for the agent.
func touchReply(t session.Touch) reply {
	e := reply{"commandId": t.CommandID, "by": "human", "viewer": t.Viewer, "keys": t.Keys,
		"at": t.At.UTC().Format(time.RFC3339Nano)}
	clipCommand(e, t.Command, touchedCommandBytes)
	if !t.Last.Equal(t.At) {
		e["lastAt"] = t.Last.UTC().Format(time.RFC3339Nano)
	}
	if t.Enters > 0 {
		e["enters"] = t.Enters
	}
	if t.Masked {
		e["masked"] = true
	}
	if t.Interrupt != "" {
		e["interruptedBy"], e["interruptKey"] = "human", t.Interrupt
	}
	return e
}

// auditTouch records one touch as it is reported: who typed into which
// command of the agent's, how many keys and which interrupt. The keys
// themselves are the recording's, for the operator.
func (s *Server) auditTouch(ctx context.Context, c session.Caller, info *call, t session.Touch) {
	if s.deps.Audit == nil || info.skipAudit {
		return
	}
	sess := info.sess
	args := map[string]any{"commandId": t.CommandID, "command": sess.RedactText(clip(t.Command, touchedCommandBytes)),
		"keys": t.Keys, "enters": t.Enters}
	if t.Masked {
		args["masked"] = true
	}
	if t.Interrupt != "" {
		args["interruptKey"] = t.Interrupt
	}
	j, _ := json.Marshal(args)
	what := fmt.Sprintf("typed %d keys into the agent's command %s", t.Keys, t.CommandID)
	if t.Interrupt != "" {
		what = fmt.Sprintf("pressed %s on the agent's command %s (%d keys)", t.Interrupt, t.CommandID, t.Keys)
	}
	rec := audit.Record{
		Time: t.At, Tenant: c.Tenant, Actor: t.Viewer, SessionID: sess.ID, SessionName: sess.Name,
		Target: sess.Target.Name, Tool: audit.EventCommandTouched, Event: audit.EventCommandTouched, Args: j,
		Outcome: audit.OutcomeOK, Reason: "a human " + what + "; reported to the agent",
		Workspace: info.workspace,
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditWaitMax)
	defer cancel()
	if _, err := s.deps.Audit.Append(actx, rec); err != nil {
		s.log.Error("audit append failed", "event", audit.EventCommandTouched, "err", err)
	}
}

// interruptFields says, on a command's read-back, who interrupted it and
// how, as its result does.
func interruptFields(r reply, rec session.Record) {
	in := rec.Interrupt
	if in == nil {
		return
	}
	r["interruptedBy"], r["interruptKey"] = in.By, in.Key
	if in.Signal != "" {
		r["interruptSignal"] = in.Signal
	}
	if in.Viewer != "" {
		r["interruptViewer"] = in.Viewer
	}
}

// touchFields are the reply fields of addTouches, which any reply that
// names a session may carry.
var touchFields = schema{
	"agentCommandTouched":     arrayOf("Any reply that names a session: what a human did in the browser terminal to your commands since your last reply (typed into one, answered its prompt, pressed Ctrl-C), each told once, whether or not the call that ran the command is still open. One entry per command and viewer.", touchSchema),
	"agentCommandTouchedHint": typed("string", "With agentCommandTouched: what it means, in one sentence."),
}

var touchSchema = object("What one viewer did to one of your commands.", schema{
	"commandId":        typed("string", "Your command; ssh_read_output reads what it printed, and says who interrupted it."),
	"command":          typed("string", "Its command line (cut to 200 bytes)."),
	"commandTruncated": typed("boolean", "True when command was cut."),
	"commandBytes":     typed("integer", "When commandTruncated: the command line's whole size."),
	"by":               schema{"type": "string", "enum": []string{"human"}, "description": "Who: a human at a viewer."},
	"viewer":           typed("string", "Which viewer (a browser signed in as the operator, an admitted browser, tandem attach)."),
	"keys":             typed("integer", "How many bytes they typed while the command ran (a key such as an arrow sends several): the command read them, or, what it left unread, the shell's next prompt did (then userCommands reports it). The keys themselves are never in a reply."),
	"enters":           typed("integer", "How many of them were Enter: lines they submitted, an answer at a prompt."),
	"masked":           typed("boolean", "True when the terminal hid some of the keys (a password prompt) or tandem could not tell."),
	"interruptedBy":    schema{"type": "string", "enum": []string{"human"}, "description": "Present when they pressed an interrupt key on it."},
	"interruptKey":     typed("string", "The key: Ctrl-C, Ctrl-Z or Ctrl-\\\\."),
	"running":          typed("boolean", "Whether the command still runs as this reply is made."),
	"exitCode":         nullable("integer", "When it has ended: its exit status; null when unknown."),
	"at":               typed("string", "When their first key came (RFC 3339)."),
	"lastAt":           typed("string", "When their latest key came, if later (RFC 3339)."),
})
