package web

import (
	"context"
	"crypto/subtle"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
)

// Operator is what the dashboard shows and may act on. Each field's
// interface is defined here, in package web, where it is consumed.
type Operator struct {
	// Token is the operator token: whoever presents it may answer
	// approvals and open every session. Required. It must be printable
	// ASCII a cookie can carry as is (no space, '"', ',', ';' or '\'),
	// such as the base64url or hex of 32 random bytes.
	Token string
	// Approvals lists and decides approvals; *approval.Broker implements it.
	// Required.
	Approvals ApprovalDesk
	// Sessions lists sessions and hands out their monitoring keys on request.
	// Required.
	Sessions SessionDirectory
	// Audit searches the audit log. Nil means no audit panel: /api/audit is
	// not found.
	Audit AuditLog
	// Replays, if set, lets the signed-in operator replay an ended session
	// by its id at /replays/{id}, whichever process of this data dir or
	// cluster ran it: the dashboard lists those, and no monitoring key of
	// theirs is kept. Nil means no such route: ended sessions open by their
	// monitoring key only.
	Replays ReplayShelf
	// Admitted, if set, records a typing link made for the session with the
	// monitoring key, before the link is handed out: whoever opens it may
	// type there. An error refuses the link.
	Admitted func(ctx context.Context, key string) error
}

// ApprovalDesk is the approvals as the dashboard sees them.
// *approval.Broker implements it.
type ApprovalDesk interface {
	// Pending lists the approvals waiting for an answer, oldest first.
	Pending() []approval.Approval
	// Recent lists decided approvals, newest first.
	Recent() []approval.Approval
	// Held lists the approvals approved after the agent's call stopped
	// waiting, which its next identical call runs until they expire.
	Held() []approval.Approval
	// Decide answers a pending approval; the first answer wins. It returns
	// approval.ErrNotFound for an unknown id, and approval.ErrDecided (with
	// the approval as decided) for one answered already.
	Decide(ctx context.Context, id string, d approval.Decision) (approval.Approval, error)
	// Watch calls fn after every change until stop is called. fn runs under
	// the desk's lock: it only signals (a non-blocking send), never calls
	// the desk.
	Watch(fn func()) (stop func())
}

// SessionRow is one session as the dashboard lists it. It holds no
// monitoring key: the dashboard asks for one, with
// [SessionDirectory.MonitorKey], only when the operator opens the session.
type SessionRow struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Tenant string `json:"tenant"`
	Actor  string `json:"actor"`
	Target string `json:"target"`
	Kind   string `json:"kind"`
	// Status is "running", "idle", "ended" and the like; shown as is.
	Status      string    `json:"status"`
	LastCommand string    `json:"lastCommand"`
	CreatedAt   time.Time `json:"createdAt"`
	// LastActivity is the last command or output; zero if none.
	LastActivity time.Time `json:"lastActivity,omitzero"`
	// EndedAt is zero while the session is live.
	EndedAt time.Time `json:"endedAt,omitzero"`
	Ended   bool      `json:"ended"`
	// HumanRequest is the agent's message while it asks for the human
	// (ssh_request_human); "" when it does not.
	HumanRequest string `json:"humanRequest,omitempty"`
	// Connections are the session's open connections through the egress
	// proxy (host:port).
	Connections []string `json:"connections,omitempty"`
	// EndReason is why an ended session ended (idle_timeout, human_exit,
	// ...): the dashboard's ended sessions show it. "" while live.
	EndReason string `json:"endReason,omitempty"`
	// Replay is the operator's link to an ended session's replay
	// (/replays/{id}); set by the dashboard when it has Operator.Replays.
	Replay string `json:"replay,omitempty"`
}

// SessionDirectory lists the sessions the dashboard shows. The session
// layer implements it.
type SessionDirectory interface {
	// Sessions lists live sessions and recently ended ones (those with a
	// recording), newest first.
	Sessions(ctx context.Context) ([]SessionRow, error)
	// MonitorKey returns the capability key of a session's monitoring URL
	// (/s/{key}), live or ended (replay). ok=false if unknown.
	MonitorKey(ctx context.Context, sessionID string) (key string, ok bool)
	// Changes calls fn (signal only, must not block) when sessions start,
	// end or run a command; it returns stop.
	Changes(fn func()) (stop func())
}

// ReplayShelf finds the recording of an ended session by the session's
// id, for the operator alone. The session layer implements it.
type ReplayShelf interface {
	// Replay returns the session's name (display only) and the path of its
	// finished asciicast v2 file. ok is false for unknown and live
	// sessions, and for a recording this tandem cannot read (one another
	// cluster node wrote).
	Replay(ctx context.Context, sessionID string) (name, path string, ok bool)
}

// AuditQuery selects audit records. An empty field matches any value.
type AuditQuery struct {
	Session, Tenant, Tool, Outcome string
	// Limit is at most how many records, newest first: the dashboard
	// always passes 1 to 500 (100 when the operator gives none).
	Limit int
	// Before, if not 0, keeps records older than this seq: the next page.
	Before int64
}

// AuditEntry is one audit record as the dashboard shows it.
type AuditEntry struct {
	Seq         int64     `json:"seq"`
	Time        time.Time `json:"time"`
	Tenant      string    `json:"tenant,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	SessionName string    `json:"sessionName,omitempty"`
	Tool        string    `json:"tool,omitempty"`
	Event       string    `json:"event,omitempty"`
	Outcome     string    `json:"outcome,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	ApprovalID  string    `json:"approvalId,omitempty"`
	// Command is the call's command line, or its other arguments
	// (secrets redacted, as audited), cut to a readable size.
	Command string `json:"command,omitempty"`
}

// AuditLog searches the audit log. The audit layer implements it.
type AuditLog interface {
	// Search returns the records q selects, newest first.
	Search(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}

// operatorCookie holds the operator token once the dashboard link was opened.
const operatorCookie = "tandem_operator"

// DashboardURL returns the link that signs a browser in to the dashboard
// served at base (such as "http://127.0.0.1:7777"). It holds the token:
// print it only where the operator alone can read it.
func DashboardURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/?token=" + url.QueryEscape(token)
}

// checkOperator panics on an Operator that lacks what the dashboard needs:
// that is a programming error of the caller, as with template.Must.
func checkOperator(op *Operator) {
	switch {
	case op.Token == "":
		panic("web: Options.Operator.Token is empty")
	case !cookieSafe(op.Token):
		panic("web: Options.Operator.Token holds characters a cookie cannot carry; use printable ASCII without space, '\"', ',', ';' or '\\'")
	case op.Approvals == nil:
		panic("web: Options.Operator.Approvals is nil")
	case op.Sessions == nil:
		panic("web: Options.Operator.Sessions is nil")
	}
}

// cookieSafe reports whether s is a cookie value that needs no quoting
// (RFC 6265 cookie-octet).
func cookieSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// tokenOK compares a presented token with the operator's in constant time.
func (s *Server) tokenOK(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.operator.Token)) == 1
}

// signedIn reports whether r carries the operator cookie with the token.
func (s *Server) signedIn(r *http.Request) bool {
	for _, c := range r.CookiesNamed(operatorCookie) {
		if s.tokenOK(c.Value) {
			return true
		}
	}
	return false
}

// serveDashboard signs a browser in and serves the dashboard.
//
// GET /?token=T with the right token sets the operator cookie and redirects
// to /, so the token leaves the address bar and the history. GET / with the
// cookie is the dashboard; anything else is a page that says where the link
// comes from, with status 401, and tells nothing about sessions.
func (s *Server) serveDashboard(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("token") {
		if !s.tokenOK(q.Get("token")) {
			s.log.Debug("web: dashboard sign-in with a wrong token", "remote", r.RemoteAddr)
			s.render(w, http.StatusUnauthorized, "signin.html", struct{ Wrong bool }{true})
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name:     operatorCookie,
			Value:    s.operator.Token,
			Path:     "/",
			HttpOnly: true,
			SameSite: http.SameSiteStrictMode,
			Secure:   r.TLS != nil,
		})
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !s.signedIn(r) {
		s.render(w, http.StatusUnauthorized, "signin.html", struct{ Wrong bool }{false})
		return
	}
	s.render(w, http.StatusOK, "dashboard.html", struct{ Audit bool }{s.operator.Audit != nil})
}

// operatorAPI guards every /api/ route: the operator cookie is required
// (401), and a request that changes something must come from the
// dashboard's own origin (403) with a JSON body (415).
func (s *Server) operatorAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A program (an upstream approver answering later) may send the
		// operator token as a bearer token instead of the cookie. No
		// browser attaches that header on its own, so such a request
		// needs no Origin check.
		bearer := false
		if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			if !s.tokenOK(got) {
				writeError(w, http.StatusUnauthorized, "unauthenticated", "the bearer token is not this tandem's operator token")
				return
			}
			bearer = true
		}
		if !bearer && !s.signedIn(r) {
			writeError(w, http.StatusUnauthorized, "unauthenticated",
				"sign in with the dashboard link tandem printed when it started, or the one `tandem dashboard-url` prints")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !bearer && !sameOrigin(r) {
				s.log.Debug("web: cross-origin dashboard request refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
				writeError(w, http.StatusForbidden, "cross_origin", "the request did not come from the dashboard's own page")
				return
			}
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "send the body as JSON, with Content-Type: application/json")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxMessage)
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether the request's Origin is the origin it was
// sent to: the same host and port as its Host header. A request without
// an Origin is refused; browsers send one with every POST and WebSocket.
// The scheme must be https when the request came over TLS; over plain
// HTTP it may be either, since a reverse proxy in front may end TLS.
// This is the terminal's WebSocket check (coder/websocket compares the
// Origin's host with Host), made stricter.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return false
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && r.TLS == nil:
	default:
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}
