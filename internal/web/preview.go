package web

import (
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Previews is what the monitoring page needs of forwarded ports (the
// preview package implements it): the links to list, and an entry ticket
// for a browser this package has found may look.
type Previews interface {
	// Ports lists the session's forwarded ports, in the order opened.
	Ports(key string) []int
	// Enter returns the URL, on the forward's own origin (host, the name
	// the browser used for tandem, and the forward's port), that lets the
	// browser into the session's forward of port once, landing on next.
	// It fails with an error wrapping ErrNoPreview when the session
	// forwards no such port.
	Enter(key string, port int, host, next string) (string, error)
}

// ErrNoPreview is wrapped by a Previews' Enter error for a port the
// session does not forward.
var ErrNoPreview = errors.New("no such forwarded port")

// StripPort is one forwarded port as the status strip links it.
type StripPort struct {
	Port int    `json:"port"`
	URL  string `json:"url"` // tandem's /s/{key}/port/{port}/, relative
}

// PreviewURL is the link on tandem's origin to the session's forwarded
// port: base as for MonitorURL.
func PreviewURL(base, key string, port int) string {
	return MonitorURL(base, key) + "/port/" + strconv.Itoa(port) + "/"
}

// servePreview answers GET /s/{key}/port/{port}/…: for the signed-in
// operator, a program with the operator token or a viewer the operator
// admitted, a redirect to the forward's own origin with a single-use
// ticket; for the watch link alone, 401. The proxied app never runs on
// this origin: its scripts would share the dashboard's.
func (s *Server) servePreview(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if _, live := s.sessions.Terminal(key); !live || s.previews == nil {
		s.serveNotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if s.operator == nil {
		previewPage(w, http.StatusForbidden, "Previews open for tandem's signed-in operator, and this tandem has none.")
		return
	}
	if ok, _ := s.mayType(r, key); !ok {
		previewPage(w, http.StatusUnauthorized, "This preview opens for tandem's signed-in operator or a viewer the operator admitted; the watch link alone does not open it. Sign in with the dashboard link tandem printed when it started.")
		return
	}
	portText := r.PathValue("port")
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != portText {
		previewPage(w, http.StatusNotFound, "Not a port: "+portText)
		return
	}
	next := "/"
	if _, rest, ok := strings.Cut(r.URL.EscapedPath(), "/port/"+portText+"/"); ok {
		next += rest
	}
	if r.URL.RawQuery != "" {
		next += "?" + r.URL.RawQuery
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(r.Host); err == nil {
		host = h
	}
	to, err := s.previews.Enter(key, port, host, next)
	if err != nil {
		if !errors.Is(err, ErrNoPreview) {
			s.log.Warn("web: preview entry failed", "err", err)
		}
		previewPage(w, http.StatusNotFound, fmt.Sprintf("The session forwards no port %d (the agent forwards one with ssh_forward_port).", port))
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// previewPage answers with a one-line page.
func previewPage(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, "<!doctype html><meta charset=utf-8><title>tandem preview</title><p>"+html.EscapeString(text)+"</p>\n")
}

// withPorts adds the session's forwarded ports to what st tells the
// status strip.
func (s *Server) withPorts(st Statuser, key string) Statuser {
	if s.previews == nil {
		return st
	}
	return portsStatus{st, s.previews, key}
}

type portsStatus struct {
	Statuser
	previews Previews
	key      string
}

func (p portsStatus) Status() SessionStatus {
	st := p.Statuser.Status()
	for _, port := range p.previews.Ports(p.key) {
		st.Ports = append(st.Ports, StripPort{Port: port, URL: PreviewURL("", p.key, port)})
	}
	return st
}
