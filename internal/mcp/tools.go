package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/target"
)

type connectArgs struct {
	Name        string `json:"name"`
	Target      string `json:"target"`
	Host        string `json:"host"`
	Port        *int   `json:"port"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	PrivateKey  string `json:"privateKey"`
	KeyFilePath string `json:"keyFilePath"`
	Passphrase  string `json:"passphrase"`
	UseAgent    bool   `json:"useAgent"`
}

type sessionArgs struct {
	SessionName  string `json:"sessionName"`
	SessionToken string `json:"sessionToken"`
}

type execArgs struct {
	SessionName    string   `json:"sessionName"`
	SessionToken   string   `json:"sessionToken"`
	Command        string   `json:"command"`
	TimeoutSeconds *float64 `json:"timeoutSeconds"`
}

func (a execArgs) callTimeout() time.Duration {
	if a.TimeoutSeconds == nil || *a.TimeoutSeconds <= 0 || *a.TimeoutSeconds > 86400 {
		return 0
	}
	return time.Duration(*a.TimeoutSeconds * float64(time.Second))
}

func (s *Server) connect(ctx context.Context, c session.Caller, a connectArgs) (reply, error) {
	if err := require("name", a.Name); err != nil {
		return nil, err
	}
	adHoc := a.Host != "" || a.Username != "" || a.Password != "" || a.PrivateKey != "" || a.KeyFilePath != "" || a.UseAgent || a.Port != nil
	if a.Target != "" && adHoc {
		return nil, invalidArg("target", "cannot be combined with host parameters; pass either a target name or host, username and credentials")
	}
	var t session.Target
	var err error
	switch {
	case adHoc:
		if err := require("host", a.Host); err != nil {
			return nil, err
		}
		if err := require("username", a.Username); err != nil {
			return nil, err
		}
		port := 22
		if a.Port != nil {
			port = *a.Port
		}
		if port < 1 || port > 65535 {
			return nil, invalidArg("port", "must be between 1 and 65535 (leave it out for 22), got %d", port)
		}
		t, err = s.deps.Targets.AdHoc(c.Tenant, target.SSH{
			Host: a.Host, Port: port, Username: a.Username, Password: a.Password,
			PrivateKey: a.PrivateKey, KeyFilePath: a.KeyFilePath, Passphrase: a.Passphrase, UseAgent: a.UseAgent,
		})
	default:
		var wsp string
		if cl := callFrom(ctx).claims; cl != nil {
			wsp = cl.Workspace
		}
		name := a.Target
		if name == "" {
			if name, err = s.deps.Targets.DefaultName(c.Tenant, wsp); err != nil {
				return nil, err
			}
		}
		if cl := callFrom(ctx).claims; cl == nil {
			s.askRoots(ctx, c, name)
		}
		t, err = s.deps.Targets.Named(c.Tenant, wsp, name)
	}
	if err != nil {
		return nil, err
	}
	// A new session has no id yet: its action is bound to the caller and
	// the name it asked for.
	if err := s.authorize(ctx, c, "ssh_connect", t.Name, approval.Action{Tenant: c.Tenant, Actor: c.Actor,
		SessionID: "new:" + c.Actor + "/" + c.ID + "/" + a.Name, SessionName: a.Name, Target: t.Name, Tool: "ssh_connect"}); err != nil {
		return nil, err
	}
	if err := s.judgeExecs(c, &t); err != nil {
		return nil, err
	}
	s.armEgress(c, &t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sess, tok, err := s.deps.Sessions.Create(ctx, c, a.Name, t)
	if err != nil {
		return nil, err
	}
	noteSession(ctx, sess)
	r := reply{
		"connection":    connection(sess.Info()),
		"sessionToken":  tok,
		"monitoringUrl": s.deps.MonitorURL(sess.MonitorKey()),
		"message":       "Session created. Use sessionToken for all subsequent commands.",
	}
	if t.Sandbox != nil {
		r["sandbox"] = t.Sandbox
	}
	if t.Kind == "local" {
		r["workspace"] = t.Workspace
	}
	noteLoginStart(r, sess.LoginStart())
	return ok(r), nil
}

func connection(i session.Info) reply {
	return reply{
		"name": i.Name, "target": i.Target, "host": i.Host, "port": i.Port, "username": i.Username,
		"kind": i.Kind, "status": i.Status, "createdAt": i.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastActivity": i.LastActivity.UTC().Format(time.RFC3339Nano), "cwd": i.Cwd,
	}
}

// lookup authenticates a session call by name, caller and token. The gate
// is the tool's business: Exec checks it atomically with the shell.
func (s *Server) lookup(ctx context.Context, c session.Caller, a sessionArgs) (*session.Session, error) {
	if a.SessionName == "" {
		return nil, invalidToken("")
	}
	if a.SessionToken == "" {
		return nil, invalidToken(a.SessionName)
	}
	sess, err := s.deps.Sessions.Lookup(c, a.SessionName, a.SessionToken)
	if ended := (*session.EndedError)(nil); errors.As(err, &ended) && ended.Session != nil {
		noteSession(ctx, ended.Session) // its reply tells what the human did before the end
	}
	if err != nil {
		return nil, err
	}
	noteSession(ctx, sess)
	return sess, nil
}

func (s *Server) exec(ctx context.Context, c session.Caller, a execArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if err := require("command", a.Command); err != nil {
		return nil, err
	}
	timeout := s.deps.CommandTimeout
	if a.TimeoutSeconds != nil {
		if *a.TimeoutSeconds <= 0 || *a.TimeoutSeconds > 86400 {
			return nil, invalidArg("timeoutSeconds", "must be more than 0 and at most 86400")
		}
		timeout = time.Duration(*a.TimeoutSeconds * float64(time.Second))
	}
	if req := callFrom(ctx).req; req != nil && req.Params != nil {
		if apr, cmd, ok := parseHeldState(req.Params.RequestState); ok {
			// The repeat of a call whose command waits for a human.
			return s.resumeHeld(ctx, c, sess, apr, cmd, timeout)
		}
	}
	// The human's commands come first: an agent asks for approval only
	// with the shell's current picture in hand. Exec checks the gate
	// again, atomically, after any wait.
	if err := sess.AgentMayAct(); err != nil {
		return nil, err
	}
	if err := sess.Gate(); err != nil {
		return nil, err
	}
	rec, err := s.judgedExec(ctx, c, sess, a.Command, timeout)
	return s.noteTimeout(c, timeout)(s.execReply(ctx, c, sess, rec, err, ""))
}

// execReply is an ssh_exec's reply for its command's record, or the error
// its wait ended with. A command held for a human answers
// approval_pending, or, for a 2026-07-28 client that may answer it, the
// approval form (skip: the approval it answered already).
func (s *Server) execReply(ctx context.Context, c session.Caller, sess *session.Session, rec session.Record, err error, skip string) (reply, error) {
	callFrom(ctx).commandID = rec.ID
	if te := (*session.TimeoutError)(nil); errors.As(err, &te) && te.Held != "" {
		callFrom(ctx).approvalID = te.Held
		s.offerForm(ctx, c, sess, te, skip)
	}
	if err != nil {
		if rec.Stdout != nil && (errors.Is(err, session.ErrShellExited) || errors.Is(err, session.ErrCaptureFailed) ||
			errors.Is(err, session.ErrIntegrationLost) || errors.Is(err, context.Canceled)) {
			return nil, &partialError{err: err, rec: rec}
		}
		return nil, err
	}
	info := callFrom(ctx)
	if rec.ExitKnown {
		code := rec.ExitCode
		info.exit = &code
	}
	info.bytes = rec.Stdout.Size() + rec.Stderr.Size()
	info.blocked = blockedReason(rec)
	res := s.result(c, rec)
	addNetwork(sess, rec, res)
	s.recorded(ctx, rec.ID, res)
	r := reply{"result": res, "commandId": rec.ID}
	s.addBackground(c, sess, r)
	return ok(r), nil
}

// maxRejudge bounds how often one call judges its command again because
// the session's directory changed while it waited.
const maxRejudge = 3

// cwdChanged refuses a command whose session moved to another directory
// after the command was judged (and perhaps approved) there.
type cwdChanged struct{ judged, now string }

func (e *cwdChanged) Error() string {
	return fmt.Sprintf("the session's directory changed from %s to %s after the command was judged", e.judged, e.now)
}

// judgedExec authorizes the command and runs it, bound to the directory it
// was judged in: the binding (session, target, tool, command, cwd) is
// checked again with the shell's lock held, just before the first key is
// pressed. If another call changed the directory meanwhile, the command is
// judged again there (an approval shows the new directory); a human's
// command trips the gate first, as always. It never runs where nobody
// judged it.
func (s *Server) judgedExec(ctx context.Context, c session.Caller, sess *session.Session, command string, timeout time.Duration) (session.Record, error) {
	act := sessionAction(c, sess, "ssh_exec", command)
	defer s.askThisClient(ctx, c, sess)()
	for range maxRejudge {
		if err := s.authorizeJudged(ctx, c, "ssh_exec", sess.Target.Name, act, sess.Target.JudgeExec != nil); err != nil {
			return session.Record{}, err
		}
		judged := approval.Fingerprint(act)
		check := func(cwd string) error {
			now := act
			now.Cwd = cwd
			if approval.Fingerprint(now) != judged {
				return &cwdChanged{judged: act.Cwd, now: cwd}
			}
			return nil
		}
		prog := startProgress(ctx, s.heartbeat())
		eo := session.ExecOptions{Timeout: timeout, OnOutput: prog.hook(), Check: check}
		if (sess.Target.JudgeExec != nil || (sess.Target.Egress != nil && sess.Target.Egress.Ask)) && s.deps.Approvals != nil {
			// A program, or a connection, held for a human answers like an
			// ask: approval_pending.
			eo.HoldWait = s.deps.Approvals.Options().Wait
		}
		rec, err := sess.Exec(ctx, command, eo)
		prog.finish()
		var moved *cwdChanged
		if !errors.As(err, &moved) {
			return rec, err
		}
		s.log.Info("the session's directory changed while the command waited; judging it again",
			"session", sess.Name, "judged", moved.judged, "now", moved.now)
		act.Cwd = moved.now
	}
	return session.Record{}, fail(codeBusy, fmt.Sprintf("The session's working directory kept changing while the command waited to run (now %s), so it was not run. Check the directory, then call again.", act.Cwd),
		reply{"reason": "cwd_changed", "cwd": act.Cwd})
}

// backgroundBudget bounds the inline background output of one reply.
const backgroundBudget = 4 << 10

// addBackground reports, in a field of its own, what background jobs
// printed since the last reply: never inside a command's output, and all
// of it readable back by its outputId.
func (s *Server) addBackground(c session.Caller, sess *session.Session, r reply) {
	bg, ok := sess.TakeBackground()
	if !ok {
		return
	}
	b := reply{"outputId": bg.ID, "stdoutBytes": bg.Stdout.Size(), "stderrBytes": bg.Stderr.Size()}
	p := s.plan(c)
	if p.limit <= 0 || p.limit > backgroundBudget {
		p.limit = backgroundBudget
	}
	p.add(b, bg.ID, "stdout", bg.Stdout)
	p.add(b, bg.ID, "stderr", bg.Stderr)
	p.fill()
	addRedacted(b, bg)
	r["background"] = b
}

func (s *Server) list(ctx context.Context, c session.Caller) reply {
	infos := s.deps.Sessions.List(c)
	if s.deps.Elsewhere != nil {
		infos = append(infos, s.deps.Elsewhere(ctx, c)...)
	}
	out := make([]any, 0, len(infos))
	for _, i := range infos {
		r := reply{
			"name": i.Name, "target": i.Target, "kind": i.Kind, "status": i.Status,
			"createdAt": i.CreatedAt.UTC().Format(time.RFC3339Nano),
		}
		// Another node's session: what only its node knows is left out.
		if !i.LastActivity.IsZero() {
			r["lastActivity"] = i.LastActivity.UTC().Format(time.RFC3339Nano)
			r["cwd"] = i.Cwd
		}
		if l := i.Last; l != nil {
			lc := reply{"commandId": l.ID, "source": sourceName(l.Source), "state": "running", "startedAt": l.Started.UTC().Format(time.RFC3339Nano)}
			clipCommand(lc, l.Command, 200)
			delete(lc, "commandBytes")
			if !l.Running {
				lc["state"] = "ended"
				lc["exitCode"] = exitCode(session.Record{ExitCode: l.ExitCode, ExitKnown: l.ExitKnown})
			}
			r["lastCommand"] = lc
		}
		if h := i.HumanRequest; h != nil {
			r["humanRequest"] = reply{"requestId": h.ID, "message": h.Message, "requestedAt": h.Since.UTC().Format(time.RFC3339Nano)}
		}
		// Each session's own secrets: the call touches no one session.
		out = append(out, redactReply(i.Redact, r))
	}
	return ok(reply{"sessions": out})
}

func (s *Server) disconnect(ctx context.Context, c session.Caller, a sessionArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, a)
	if err != nil {
		return nil, err
	}
	if err := sess.AgentMayAct(); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c, "ssh_disconnect", sess.Target.Name, sessionAction(c, sess, "ssh_disconnect", "")); err != nil {
		return nil, err
	}
	if err := s.deps.Sessions.Disconnect(sess); err != nil {
		return nil, err
	}
	return ok(reply{"message": fmt.Sprintf("Session '%s' disconnected; its shell and processes have ended.", sess.Name)}), nil
}

func (s *Server) monitoringURL(ctx context.Context, c session.Caller, a sessionArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, a)
	if err != nil {
		return nil, err
	}
	if err := sess.Gate(); err != nil {
		return nil, err
	}
	return ok(reply{"sessionName": sess.Name, "monitoringUrl": s.deps.MonitorURL(sess.MonitorKey())}), nil
}

func (s *Server) cancel(ctx context.Context, c session.Caller, a sessionArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, a)
	if err != nil {
		return nil, err
	}
	if err := sess.AgentMayAct(); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c, "ssh_cancel", sess.Target.Name, sessionAction(c, sess, "ssh_cancel", "")); err != nil {
		return nil, err
	}
	rec, err := sess.Cancel(ctx)
	if err != nil {
		return nil, err
	}
	res := s.result(c, rec)
	addNetwork(sess, rec, res)
	s.recorded(ctx, rec.ID, res)
	r := reply{"message": cancelMessage(rec), "result": res, "commandId": rec.ID}
	s.addBackground(c, sess, r)
	return ok(r), nil
}

// cancelMessage says what ended a cancelled command, and how it ended.
func cancelMessage(rec session.Record) string {
	how := "Ctrl-C"
	if in := rec.Interrupt; in != nil && in.Signal != "" {
		how = "Ctrl-C, then " + in.Signal + " (it outlived Ctrl-C)"
	}
	if !rec.ExitKnown {
		return "The command was interrupted with " + how + "; its exit status is unknown."
	}
	return fmt.Sprintf("The command was interrupted with %s; it exited with status %d.", how, rec.ExitCode)
}
