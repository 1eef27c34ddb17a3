package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/session"
)

// A held ask is an approval that something inside the agent's running
// command waits for: a program it started (exec judging) or a connection
// one of its programs opened (the egress proxy's ask). It reaches the same
// approvers as a command line's ask: the dashboard and the monitoring
// page always; the agent's client while the agent's ssh_exec call waits,
// where the policy's approvers include it; or, for a forward, the policy's
// upstream approver.

// heldClients are, by session ID, the connections of the agent calls that
// wait for their command and whose client may answer its held asks (see
// askThisClient); and the held approvals sent upstream.
type heldClients struct {
	mu sync.Mutex
	m  map[string]*mcp.ServerSession
	// upstream counts, per held approval that goes to an upstream
	// approver, the waiters for it: the agent's client never answers those.
	upstream map[string]int
}

// set names ss the client of sessionID's waiting call, until the
// returned func is called.
func (h *heldClients) set(sessionID string, ss *mcp.ServerSession) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*mcp.ServerSession{}
	}
	h.m[sessionID] = ss
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.m[sessionID] == ss {
			delete(h.m, sessionID)
		}
	}
}

// get returns the client of sessionID's waiting call, or nil.
func (h *heldClients) get(sessionID string) *mcp.ServerSession {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[sessionID]
}

// forwarded counts a waiter for approval id that went upstream (on), or
// one that stopped waiting.
func (h *heldClients) forwarded(id string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.upstream == nil {
		h.upstream = map[string]int{}
	}
	if on {
		h.upstream[id]++
	} else if h.upstream[id]--; h.upstream[id] <= 0 {
		delete(h.upstream, id)
	}
}

// isForwarded reports whether approval id waits for an upstream.
func (h *heldClients) isForwarded(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upstream[id] > 0
}

// askThisClient lets the held asks of sess's command go to the calling
// client while the call waits, where it may answer them: by a server
// request, or, for a 2026-07-28 client, as the form in the call's reply.
// The returned func ends that when the call stops waiting.
func (s *Server) askThisClient(ctx context.Context, c session.Caller, sess *session.Session) func() {
	ss := callFrom(ctx).serverSession()
	if ss == nil || !clientCanElicit(ss) || s.deps.Policy == nil || !s.deps.Policy(c.Tenant, sess.Target.Name).AskClient {
		return func() {}
	}
	return s.held.set(sess.ID, ss)
}

// heldAsk is one thing waiting inside a command for a decision.
type heldAsk struct {
	sess   *session.Session
	act    approval.Action
	rule   string
	reason string
	// hold marks the command held while the approval is pending, so its
	// ssh_exec answers approval_pending after waitSeconds, or after wait;
	// nil when no agent command runs.
	hold func(id string, wait time.Duration) (release func())
	// forward sends the ask to the policy's upstream approver.
	forward bool
	// gone, if set, settles the approval with this reason when the waiter
	// leaves first; empty leaves it pending for a retry to join.
	gone string
}

// askHeld asks about h and waits until the approval is decided or
// expires. The waiter (a program in the kernel, a connection in the
// proxy) waits that long; the agent's call answers approval_pending
// after waitSeconds (hold). If the waiter leaves first, its approval is
// settled where h.gone says so.
func (s *Server) askHeld(ctx context.Context, h heldAsk) (approval.Outcome, error) {
	b := s.deps.Approvals
	var up Upstream
	if h.forward {
		if s.deps.Policy != nil {
			up = s.deps.Policy(h.act.Tenant, h.act.Target).Upstream
		}
		if up == nil {
			return approval.Outcome{}, errors.New("it is to be forwarded, and the policy has no forward upstream")
		}
	}
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	var release func()
	asked := ""
	hooks := approval.Hooks{
		Wait: b.Options().Timeout + time.Second,
		OnPending: func(a approval.Approval) {
			asked = a.ID
			ss := s.held.get(h.sess.ID)
			if up != nil {
				ss = nil // the upstream decides; the client is not asked
			}
			var wait time.Duration
			if ss != nil && multiRoundTrip(ss) {
				// The form goes in the waiting call's reply: at once.
				wait = time.Nanosecond
			}
			if h.hold != nil {
				release = h.hold(a.ID, wait)
			}
			switch {
			case up != nil:
				s.held.forwarded(a.ID, true)
				go s.forwardHeld(ectx, up, a, b.Options().Wait)
			case ss != nil && wait == 0:
				s.askClient(ectx, ss, a, h.sess.Target.Redact)
			}
		},
	}
	out, err := b.Ask(ctx, h.act, h.rule, h.reason, hooks)
	if release != nil {
		release()
	}
	if asked != "" && up != nil {
		s.held.forwarded(asked, false)
	}
	if err != nil && asked != "" && h.gone != "" {
		_, _ = b.Decide(context.WithoutCancel(ctx), asked, approval.Decision{By: byProgramGone, Reason: h.gone})
	}
	return out, err
}

// forwardHeld asks the upstream about a held approval until it answers
// or the approval ends here: a held program or connection has no repeated
// call to ask again for it.
func (s *Server) forwardHeld(ctx context.Context, up Upstream, a approval.Approval, wait time.Duration) {
	for {
		start := time.Now()
		if !s.forwardUp(ctx, up, a, wait) {
			return
		}
		if cur, ok := s.deps.Approvals.Get(a.ID); !ok || cur.Status != approval.Pending {
			return
		}
		select { // pending upstream: ask again, at most once a second
		case <-ctx.Done():
			return
		case <-time.After(time.Second - time.Since(start)):
		}
	}
}

// heldRequestState marks a repeated ssh_exec as the continuation of one
// whose command waits for a human: the approval and the command.
const heldRequestState = "tandem.held/"

func heldState(approvalID, commandID string) string {
	return heldRequestState + approvalID + "/" + commandID
}

// parseHeldState reads heldState back; ok is false for any other state.
func parseHeldState(s string) (approvalID, commandID string, ok bool) {
	rest, ok := strings.CutPrefix(s, heldRequestState)
	if !ok {
		return "", "", false
	}
	approvalID, commandID, ok = strings.Cut(rest, "/")
	return approvalID, commandID, ok && approvalID != "" && commandID != ""
}

// clientMayAnswer reports whether the calling client may decide the held
// approval id: the policy's approvers include the client, the client
// declared elicitation, and the approval is a pending held ask of this
// very session, not one sent upstream.
func (s *Server) clientMayAnswer(ctx context.Context, c session.Caller, sess *session.Session, id string) (approval.Approval, bool) {
	if s.deps.Approvals == nil || s.deps.Policy == nil || !clientCanElicit(callFrom(ctx).serverSession()) {
		return approval.Approval{}, false
	}
	if !s.deps.Policy(c.Tenant, sess.Target.Name).AskClient || s.held.isForwarded(id) {
		return approval.Approval{}, false
	}
	a, ok := s.ownApproval(c, sess, id)
	held := a.Action.Tool == networkTool || a.Action.Parent != ""
	if !ok || a.Status != approval.Pending || !held {
		return approval.Approval{}, false
	}
	return a, true
}

// ownApproval returns the approval id if it is one of sess's.
func (s *Server) ownApproval(c session.Caller, sess *session.Session, id string) (approval.Approval, bool) {
	b := s.deps.Approvals
	if b == nil {
		return approval.Approval{}, false
	}
	a, ok := b.Get(id)
	return a, ok && a.Action.SessionID == sess.ID && a.Action.Tenant == c.Tenant
}

// offerForm turns a held ssh_exec's approval_pending into the approval
// form for a 2026-07-28 client, which shows it to its human and repeats
// the call with the answer (see resumeHeld). skip is an approval the
// client answered already in this call: it is not asked twice.
func (s *Server) offerForm(ctx context.Context, c session.Caller, sess *session.Session, te *session.TimeoutError, skip string) {
	info := callFrom(ctx)
	if ss := info.serverSession(); te.Held == "" || te.Held == skip || ss == nil || !multiRoundTrip(ss) {
		return
	}
	a, ok := s.clientMayAnswer(ctx, c, sess, te.Held)
	if !ok {
		return
	}
	info.input = mcp.InputRequestMap{approvalInput: &mcp.ElicitParams{Mode: "form",
		Message: elicitMessage(a, sess.Target.Redact), RequestedSchema: approvalForm}}
	info.requestState = heldState(a.ID, te.Partial.ID)
}

// resumeHeld serves a repeated ssh_exec that carries the client's answer
// about a held approval: the answer decides it (where the client may
// answer), and the call goes on waiting for the same command. It never
// runs a command: whatever the state says, the repeat of a held call only
// ever waits for the one that runs.
func (s *Server) resumeHeld(ctx context.Context, c session.Caller, sess *session.Session, approvalID, commandID string, timeout time.Duration) (reply, error) {
	info := callFrom(ctx)
	info.commandID = commandID
	if rec, _, found := sess.Command(commandID); !found || rec.Source != "agent" {
		// Only the agent's own command is waited for here.
		return nil, unknownCommand(sess, commandID)
	}
	// decided: the wait goes past this approval, whose hold is about to
	// be released. Decided or not (a dismissed form), the client is not
	// asked about it again in this call.
	decided := ""
	if input, _ := info.req.Params.InputResponses[approvalInput].(*mcp.ElicitResult); input != nil {
		if _, ok := s.clientMayAnswer(ctx, c, sess, approvalID); ok {
			if d, ok := clientDecision(input); ok {
				if _, err := s.deps.Approvals.Decide(ctx, approvalID, d); err == nil {
					decided = approvalID
				}
			}
		}
	}
	if _, ok := s.ownApproval(c, sess, approvalID); ok {
		// Only an approval of this session is named in the reply and
		// the audit; a state the client made up names none.
		info.approvalID = approvalID
	}
	defer s.askThisClient(ctx, c, sess)()
	rec, err := sess.AwaitHeld(ctx, commandID, timeout, decided)
	return s.execReply(ctx, c, sess, rec, err, approvalID)
}

// heldWhat describes a held approval's action for the client's form.
func heldWhat(a approval.Approval) (string, bool) {
	act := a.Action
	switch {
	case act.Tool == networkTool:
		return fmt.Sprintf("tandem: a program of the agent's command in session %q wants to connect to %s, which the session's network allowlist does not list.",
			act.SessionName, strings.TrimPrefix(act.Command, "connect ")), true
	case act.Parent != "":
		return fmt.Sprintf("tandem: the agent's command in session %q started a program that waits for approval:\n\n%s\n\nin %s\n\n(the command: %s)",
			act.SessionName, act.Command, act.Cwd, clip(act.Parent, 200)), true
	}
	return "", false
}
