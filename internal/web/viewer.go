package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// Who may type. The monitoring key is handed to the agent too (the URL is
// in ssh_connect's reply), so with an operator configured the key alone
// only watches. Keys are taken from:
//
//   - a browser signed in as the operator (the dashboard's cookie);
//   - a program presenting the operator token as a bearer token (tandem
//     attach, which reads it from the operator's data dir);
//   - a browser the operator admitted: one that opened the typing link
//     (/s/{key}?admit=T) the operator made on the page, which sets a
//     cookie for that session's path alone.
//
// A read-only viewer's input and resizes are dropped here, at the server,
// whatever its page does.

// InputHeader is the response header of a terminal's WebSocket upgrade
// that tells a program whether the server takes its keys: [InputTyping] or
// [InputWatching].
const InputHeader = "Tandem-Input"

// The values of [InputHeader].
const (
	InputTyping   = "typing"
	InputWatching = "watching"
)

// admitCookie carries a typing link's token, on the path of its session.
const admitCookie = "tandem_admit"

// admitToken is the typing-link token of the session with the monitoring
// key: a MAC of the key under the operator token, so it needs no storage,
// holds for the session's life and opens no other session.
func (s *Server) admitToken(key string) string {
	m := hmac.New(sha256.New, []byte(s.operator.Token))
	m.Write([]byte("tandem admit\x00" + key))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// admitOK compares a presented typing-link token with the key's.
func (s *Server) admitOK(key, got string) bool {
	return hmac.Equal([]byte(got), []byte(s.admitToken(key)))
}

// mayType reports whether the viewer of r may type into the session with
// the key, and how it is named in the records of what it types. With no
// operator configured no one could sign in, so the key types, as before
// the operator existed (tandem itself always configures one).
func (s *Server) mayType(r *http.Request, key string) (bool, string) {
	if s.operator == nil {
		return true, "browser"
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(got) {
		if strings.HasPrefix(r.UserAgent(), attachAgent) {
			return true, "tandem attach"
		}
		return true, "operator"
	}
	if s.signedIn(r) {
		return true, "operator"
	}
	for _, c := range r.CookiesNamed(admitCookie) {
		if s.admitOK(key, c.Value) {
			return true, "admitted viewer"
		}
	}
	if strings.HasPrefix(r.UserAgent(), attachAgent) {
		return false, "tandem attach (watching)"
	}
	return false, "browser (watching)"
}

// admitFromLink turns the typing link's ?admit=T into the session-path
// cookie and sends the browser to the bare URL, so the token leaves the
// address bar and the history. It reports whether it answered r.
func (s *Server) admitFromLink(w http.ResponseWriter, r *http.Request, key string) bool {
	q := r.URL.Query()
	if s.operator == nil || !q.Has("admit") {
		return false
	}
	bare := MonitorURL("", key)
	if !s.admitOK(key, q.Get("admit")) {
		s.log.Debug("web: typing link with a wrong token", "remote", r.RemoteAddr)
		http.Redirect(w, r, bare, http.StatusSeeOther) // the page, read-only
		return true
	}
	http.SetCookie(w, &http.Cookie{
		Name:     admitCookie,
		Value:    q.Get("admit"),
		Path:     bare,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil,
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, bare, http.StatusSeeOther)
	return true
}

// serveAdmit answers POST /api/admit {"path":"/s/{key}"} for the operator
// with the typing link of that live session: whoever opens it in a browser
// may type there, as the operator's guest.
func (s *Server) serveAdmit(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Path string `json:"path"`
	}
	if !readBody(w, r, &body) {
		return
	}
	esc, ok := strings.CutPrefix(body.Path, "/s/")
	key, err := url.PathUnescape(esc)
	if !ok || err != nil || key == "" || strings.Contains(key, "/") {
		writeError(w, http.StatusBadRequest, "bad_request", `give "path": the session page's path, /s/…`)
		return
	}
	if _, live := s.sessions.Terminal(key); !live {
		writeError(w, http.StatusNotFound, "session_not_found", "no live session has this page")
		return
	}
	if s.operator.Admitted != nil {
		if err := s.operator.Admitted(r.Context(), key); err != nil {
			s.log.Error("web: a typing link could not be recorded; none was made", "err", err)
			writeError(w, http.StatusServiceUnavailable, "audit_unavailable", "the audit log cannot record the typing link right now, so none was made; see tandem's log")
			return
		}
	}
	s.log.Info("web: typing link made", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, apiReply{Success: true, URL: MonitorURL("", key) + "?admit=" + s.admitToken(key)})
}
