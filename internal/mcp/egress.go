package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
)

// EgressProxy makes a session's place on tandem's egress proxy, which
// the shell's backend then starts; *egress.Proxy implements it.
type EgressProxy interface {
	Prepare(s egress.Session) (*egress.Listener, error)
}

// networkTool names a connection through the egress proxy in approvals
// and audit records.
const networkTool = "network"

// armEgress lets a target with a network allowlist open its session's
// proxy port: every decision is audited and filed with the session, and
// with ask an unlisted host waits for a human.
func (s *Server) armEgress(c session.Caller, t *session.Target) {
	e := t.Egress
	if e == nil || s.deps.Egress == nil {
		return // a session without a proxy is refused when it starts
	}
	e.Open = func(ctx context.Context, sess *session.Session) (shell.LaunchProxy, func(), error) {
		es := egress.Session{Name: sess.Name, Allow: e.Allow, Hosts: e.Hosts, Credentials: e.Credentials,
			Report: func(conn egress.Conn) { s.noteConnection(c, sess, conn) }}
		if e.Ask {
			es.Ask = func(ctx context.Context, host string, port uint16) (bool, error) {
				return s.askConnection(ctx, c, sess, host, port)
			}
			es.AskRequest = func(ctx context.Context, host string, port uint16, method, path, why string) (bool, error) {
				return s.askRequest(ctx, c, sess, host, port, method, path, why)
			}
		}
		l, err := s.deps.Egress.Prepare(es)
		if err != nil {
			return nil, nil, err
		}
		return l, func() { _ = l.Close() }, nil
	}
}

// noteConnection files one report of the proxy: with the session (for
// replies, the status strip and the dashboard) and, for a decision, in
// the audit log.
func (s *Server) noteConnection(c session.Caller, sess *session.Session, conn egress.Conn) {
	sess.NoteConnection(conn)
	if conn.Ended || s.deps.Audit == nil {
		return
	}
	a := map[string]any{"host": conn.Host, "port": conn.Port, "address": conn.Addr}
	addInspected(a, conn)
	args, _ := json.Marshal(a)
	rec := audit.Record{
		Time: conn.Started, Tenant: c.Tenant, Actor: s.auditActor(c), SessionID: sess.ID, SessionName: sess.Name,
		Target: sess.Target.Name, Tool: networkTool, Event: audit.EventNetwork, Args: args,
		Outcome: conn.Decision, Reason: conn.Reason,
	}
	if c.Actor != "" {
		rec.Actor = c.Actor
	}
	// Not on the proxy's path: the connection is not held for the disk.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), auditWaitMax)
		defer cancel()
		if _, err := s.deps.Audit.Append(ctx, rec); err != nil {
			s.log.Error("audit append failed", "tool", networkTool, "err", err)
		}
	}()
}

// askConnection holds a connection to an unlisted host until a human
// decides; the approval names the session and host:port.
func (s *Server) askConnection(ctx context.Context, c session.Caller, sess *session.Session, host string, port uint16) (bool, error) {
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	reason := fmt.Sprintf("session %s wants to reach %s, which its network allowlist does not list", sess.Name, target)
	if as := sess.Target.Egress.Hosts[host]; len(as) > 0 {
		// The target's hosts: mapping decides where it leads, a loopback
		// or private address included: the approver should know.
		reason += fmt.Sprintf("; the target's hosts: maps %s to %s", host, as[0])
	}
	return s.askNetwork(ctx, c, sess, "connect "+target, reason)
}

// askRequest holds one request on an inspected connection that its
// allowlist entry's methods or paths do not allow, until a human
// decides; the approval reads "GET api.example.com/repos/acme/x".
func (s *Server) askRequest(ctx context.Context, c session.Caller, sess *session.Session, host string, port uint16, method, path, why string) (bool, error) {
	hp := host
	if port != 443 {
		hp = net.JoinHostPort(host, strconv.Itoa(int(port)))
	}
	what := method + " " + hp + path
	return s.askNetwork(ctx, c, sess, what, fmt.Sprintf("session %s wants to send %s: %s", sess.Name, what, why))
}

// askNetwork holds a connection or request of the session's until a
// human decides on command.
func (s *Server) askNetwork(ctx context.Context, c session.Caller, sess *session.Session, command, reason string) (bool, error) {
	b := s.deps.Approvals
	if b == nil {
		return false, fmt.Errorf("nobody can approve it: this server has no approvals")
	}
	act := approval.Action{Tenant: c.Tenant, Actor: c.Actor, SessionID: sess.ID, SessionName: sess.Name,
		Target: sess.Target.Name, Tool: networkTool, Command: command}
	rule := "network.ask"
	if sess.Target.Egress.Forward {
		rule = "network.forward"
	}
	// The connection waits until the approval is decided or expires; the
	// agent's ssh_exec waiting for the command answers approval_pending
	// once waitSeconds have passed, naming it.
	out, err := s.askHeld(ctx, heldAsk{sess: sess, act: act, rule: rule, reason: reason,
		hold: func(id string, wait time.Duration) func() {
			if rel, ok := sess.HoldAgent(id, wait); ok {
				return rel
			}
			return nil
		},
		// A connection that gives up waiting (a client's own timeout)
		// leaves its approval pending: the client's retry joins it.
		forward: sess.Target.Egress.Forward})
	switch {
	case err != nil:
		return false, err
	case out.Kind == approval.Run:
		return true, nil
	case out.Approval.Decision != nil:
		// The approver's words and who they are reach the refused program
		// (the 403), the audit record and the agent's reply.
		d := out.Approval.Decision
		return false, &egress.Denial{Reason: d.Reason, By: d.By}
	}
	return false, nil
}

// endGrace bounds the wait, at a command's end, for the proxy to report
// the end of the connections its program closed.
const endGrace = 250 * time.Millisecond

// anyOpen reports whether a connection let through is still open.
func anyOpen(conns []egress.Conn) bool {
	for _, c := range conns {
		if !c.Ended && (c.Decision == egress.Allowed || c.Decision == egress.Approved) {
			return true
		}
	}
	return false
}

// maxReplyConnections bounds the connections one reply lists.
const maxReplyConnections = 20

// addNetwork tells the agent, in a finished command's reply, what its
// command connected to through the egress proxy, and names the hosts
// that were refused with why and who decided (networkRefused), so a
// failed download says why: for HTTPS too, where the program sees only
// the proxy's 403 to its CONNECT and never the reason in its body.
func addNetwork(sess *session.Session, rec session.Record, r reply) {
	if sess.Target.Egress == nil || rec.Started.IsZero() {
		return
	}
	until := rec.Started.Add(rec.Duration)
	conns := sess.Connections(rec.Started, until)
	// A connection the command's program closed as it exited is reported
	// ended a moment later (the proxy sees the close on its own time);
	// one still open after the grace is a background job's.
	for deadline := time.Now().Add(endGrace); time.Now().Before(deadline) && anyOpen(conns); {
		time.Sleep(10 * time.Millisecond)
		conns = sess.Connections(rec.Started, until)
	}
	var refused, list []reply
	for _, c := range conns {
		if c.Decision == egress.Refused || c.Decision == egress.Denied {
			if len(refused) < maxReplyConnections {
				by := c.DecidedBy
				if by == "" {
					by = "nobody" // the program stopped waiting before anyone answered
				}
				rr := reply{"host": c.Host, "port": c.Port, "reason": c.Reason, "decidedBy": by}
				addInspected(rr, c)
				refused = append(refused, rr)
			}
			continue
		}
		if len(list) < maxReplyConnections {
			r := reply{"host": c.Host, "port": c.Port, "address": c.Addr, "decision": c.Decision,
				"bytesUp": c.Up, "bytesDown": c.Down, "open": !c.Ended}
			if c.Ended {
				r["durationMs"] = c.Duration.Milliseconds()
			}
			addInspected(r, c)
			list = append(list, r)
		}
	}
	if len(refused) > 0 {
		r["networkRefused"] = refused
	}
	if len(list) > 0 {
		r["connections"] = list
	}
}

// addInspected adds what an inspected connection tells: the request
// refused (method, path), that the proxy saw inside its TLS, and the
// credentials it adds, by name (never their values).
func addInspected(r map[string]any, c egress.Conn) {
	if c.Method != "" {
		r["method"] = c.Method
	}
	if c.Path != "" {
		r["path"] = c.Path
	}
	if c.Inspected {
		r["inspected"] = true
	}
	if c.Credential != "" {
		r["credential"] = c.Credential
	}
}
