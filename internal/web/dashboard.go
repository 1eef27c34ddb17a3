package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tandem-sh/tandem/internal/approval"
)

const (
	// maxReason bounds the reason an operator gives with a decision, in
	// characters.
	maxReason = 1000
	// maxRememberMinutes bounds "approve and remember" as the dashboard
	// accepts it; the broker caps it further at its own maximum.
	maxRememberMinutes = 24 * 60
	// recentShown is how many decided approvals the dashboard shows.
	recentShown = 50
	// Audit searches return defaultAuditLimit records unless asked for
	// another number, and never more than maxAuditLimit.
	defaultAuditLimit = 100
	maxAuditLimit     = 500
	// maxAuditFilter bounds one filter value of an audit search.
	maxAuditFilter = 200
	// listTimeout bounds one listing of the sessions.
	listTimeout = 5 * time.Second
)

// apiReply is the JSON of every answer of the dashboard API but state.
type apiReply struct {
	Success  bool               `json:"success"`
	Error    string             `json:"error,omitempty"`
	Message  string             `json:"message,omitempty"`
	Approval *approval.Approval `json:"approval,omitempty"`
	URL      string             `json:"url,omitempty"`
}

// dashboardState is everything the dashboard lists but the audit log: the
// reply of GET /api/state, and each message of /api/ws with T "state".
type dashboardState struct {
	T       string `json:"t,omitempty"`
	Success bool   `json:"success,omitempty"`
	// Now is the server's clock, so the page counts expiries down right
	// even when the browser's clock is off.
	Now     time.Time           `json:"now"`
	Pending []approval.Approval `json:"pending"`
	Recent  []approval.Approval `json:"recent"`
	// Held are the ids of approved approvals no call has picked up yet:
	// the agent's next identical call runs each, until it expires.
	Held     []string     `json:"held"`
	Sessions []SessionRow `json:"sessions"`
	// SessionsError says the sessions could not be listed; the approvals
	// are still there.
	SessionsError string `json:"sessionsError,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, apiReply{Error: code, Message: message})
}

// state collects what the dashboard lists. Sessions that cannot be listed
// are logged and reported in the state; the approvals are always there.
func (s *Server) state(ctx context.Context) dashboardState {
	op := s.operator
	st := dashboardState{Now: time.Now(), Pending: op.Approvals.Pending(), Recent: op.Approvals.Recent()}
	if len(st.Recent) > recentShown {
		st.Recent = st.Recent[:recentShown]
	}
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	rows, err := op.Sessions.Sessions(ctx)
	if err != nil {
		s.log.Warn("web: list sessions for the dashboard", "err", err)
		st.SessionsError = "the sessions could not be listed; see tandem's log"
	}
	st.Sessions = rows
	if op.Replays != nil {
		for i := range st.Sessions {
			if r := &st.Sessions[i]; r.Ended {
				r.Replay = "/replays/" + url.PathEscape(r.ID)
			}
		}
	}
	st.Held = []string{}
	for _, a := range op.Approvals.Held() {
		st.Held = append(st.Held, a.ID)
	}
	if st.Pending == nil {
		st.Pending = []approval.Approval{}
	}
	if st.Recent == nil {
		st.Recent = []approval.Approval{}
	}
	if st.Sessions == nil {
		st.Sessions = []SessionRow{}
	}
	return st
}

// serveState answers GET /api/state.
func (s *Server) serveState(w http.ResponseWriter, r *http.Request) {
	st := s.state(r.Context())
	st.Success = true
	writeJSON(w, http.StatusOK, st)
}

// decisionRequest is the body of POST /api/approvals/{id}/decision.
type decisionRequest struct {
	Approve         *bool  `json:"approve"`
	Reason          string `json:"reason"`
	RememberMinutes int    `json:"rememberMinutes"`
}

// readBody decodes the JSON body of r into v. An empty body leaves v as it
// is. It answers the request itself and returns false if the body is bad.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(r.Body).Decode(v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", "the request body is over "+strconv.FormatInt(tooBig.Limit, 10)+" bytes")
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "the body is not the JSON expected: "+err.Error())
	}
	return false
}

// serveDecision answers POST /api/approvals/{id}/decision: the operator
// approves, denies, or approves and remembers a pending approval.
func (s *Server) serveDecision(w http.ResponseWriter, r *http.Request) {
	var req decisionRequest
	if !readBody(w, r, &req) {
		return
	}
	switch {
	case req.Approve == nil:
		writeError(w, http.StatusBadRequest, "bad_request", `say "approve": true or false`)
		return
	case utf8.RuneCountInString(req.Reason) > maxReason:
		writeError(w, http.StatusBadRequest, "reason_too_long", "a reason is at most "+strconv.Itoa(maxReason)+" characters")
		return
	case req.RememberMinutes < 0 || req.RememberMinutes > maxRememberMinutes:
		writeError(w, http.StatusBadRequest, "bad_request", "rememberMinutes is 0 to "+strconv.Itoa(maxRememberMinutes))
		return
	}
	d := approval.Decision{
		Approved: *req.Approve,
		Reason:   req.Reason,
		By:       approval.ByDashboard,
		Approver: "operator",
	}
	if d.Approved {
		d.Remember = time.Duration(req.RememberMinutes) * time.Minute
	}
	id := r.PathValue("id")
	a, err := s.operator.Approvals.Decide(r.Context(), id, d)
	switch {
	case err == nil:
		s.log.Debug("web: approval decided on the dashboard", "approval", id, "approved", d.Approved, "remember", d.Remember)
		writeJSON(w, http.StatusOK, apiReply{Success: true, Approval: &a})
	case errors.Is(err, approval.ErrNotFound):
		writeError(w, http.StatusNotFound, "approval_not_found", "no approval has this id")
	case errors.Is(err, approval.ErrDecided):
		writeJSON(w, http.StatusConflict, apiReply{Error: "approval_decided", Message: "the approval was decided already", Approval: &a})
	default:
		s.log.Warn("web: decide an approval", "approval", id, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the decision could not be made; see tandem's log")
	}
}

// serveWatch answers POST /api/sessions/{id}/watch with the monitoring URL
// of a session. This is the only way a monitoring key reaches the
// dashboard: when the operator asks to watch or replay that session.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request) {
	var body struct{}
	if !readBody(w, r, &body) {
		return
	}
	id := r.PathValue("id")
	key, ok := s.operator.Sessions.MonitorKey(r.Context(), id)
	if !ok {
		writeError(w, http.StatusNotFound, "session_not_found", "no session has this id, or its recording is gone")
		return
	}
	s.log.Debug("web: monitoring URL handed to the dashboard", "session", id)
	writeJSON(w, http.StatusOK, apiReply{Success: true, URL: MonitorURL("", key)})
}

// serveAudit answers GET /api/audit?session=&tenant=&tool=&outcome=&limit=.
func (s *Server) serveAudit(w http.ResponseWriter, r *http.Request) {
	if s.operator.Audit == nil {
		writeError(w, http.StatusNotFound, "audit_unavailable", "this tandem keeps no audit log to search")
		return
	}
	v := r.URL.Query()
	q := AuditQuery{Session: v.Get("session"), Tenant: v.Get("tenant"), Tool: v.Get("tool"), Outcome: v.Get("outcome"), Limit: defaultAuditLimit}
	for _, f := range []string{q.Session, q.Tenant, q.Tool, q.Outcome} {
		if len(f) > maxAuditFilter {
			writeError(w, http.StatusBadRequest, "bad_request", "a filter is at most "+strconv.Itoa(maxAuditFilter)+" bytes")
			return
		}
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit is a whole number, at most "+strconv.Itoa(maxAuditLimit))
			return
		}
		if n > 0 {
			q.Limit = min(n, maxAuditLimit)
		}
	}
	if b := v.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "bad_request", "before is the seq of the oldest record shown, a whole number from 1")
			return
		}
		q.Before = n
	}
	records, err := s.operator.Audit.Search(r.Context(), q)
	if err != nil {
		s.log.Warn("web: search the audit log", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the audit log could not be searched; see tandem's log")
		return
	}
	if records == nil {
		records = []AuditEntry{}
	}
	writeJSON(w, http.StatusOK, struct {
		Success bool         `json:"success"`
		Records []AuditEntry `json:"records"`
	}{true, records})
}

// serveAPINotFound answers every other /api/ path.
func serveAPINotFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "not_found", "no such API route")
}
