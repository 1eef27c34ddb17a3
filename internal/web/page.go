package web

import (
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
)

// contentSecurityPolicy lets scripts, styles and connections come only from
// this origin, and forbids framing.
//
// style-src allows 'unsafe-inline' because xterm.js sizes and colours its
// rows through <style> elements it creates at run time; script-src does not.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; img-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// secureHeaders sets the headers every response carries. Referrer-Policy
// keeps the capability key in the URL from leaving in a Referer.
// checkHost refuses a request whose Host is neither a loopback name nor
// one of public, before any route sees it.
func checkHost(public []string, h http.Handler) http.Handler {
	allowed := map[string]bool{}
	for _, p := range public {
		allowed[strings.ToLower(strings.TrimSuffix(p, "."))] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowed) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			fmt.Fprintf(w, "tandem does not serve the host %q. Open the monitoring URL exactly as tandem gave it (a loopback address), or add this name to web.publicHosts in tandem.yaml.\n", r.Host)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a Host header names loopback or an allowed
// public name. Port is ignored; names compare case-insensitively.
func hostAllowed(hostport string, public map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "" {
		return false
	}
	if host == "localhost" || public[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("X-Frame-Options", "DENY")
		h.ServeHTTP(w, r)
	})
}

// staticFiles serves the page's scripts and styles from the embedded
// assets, and nothing else there: no directory listings, templates or
// license files.
func (s *Server) staticFiles(files http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path.Ext(r.URL.Path) {
		case ".js", ".css", ".svg":
			files.ServeHTTP(w, r)
		case ".json": // the web app manifest
			w.Header().Set("Content-Type", "application/manifest+json")
			files.ServeHTTP(w, r)
		default:
			s.serveNotFound(w, r)
		}
	})
}

// servePage renders the terminal page of the live session with the key in
// the path or, once it ended, the replay page of its recording. Neither page
// holds the key: its script finds the WebSocket or the cast beside its own URL.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if t, ok := s.sessions.Terminal(key); ok {
		if s.admitFromLink(w, r, key) {
			return
		}
		typing, who := s.mayType(r, key)
		s.render(w, http.StatusOK, "terminal.html", struct {
			Name, Owner    string
			Typing, Admits bool
		}{t.Name(), t.Owner(), typing, who == "operator"})
		return
	}
	if name, _, ok := s.recording(key); ok {
		s.render(w, http.StatusOK, "replay.html", struct{ Name string }{name})
		return
	}
	s.serveNotFound(w, r)
}

// serveIndex says what tandem is and where session links come from, for
// whoever opens the bare address; it names no session.
func (s *Server) serveIndex(w http.ResponseWriter, _ *http.Request) {
	s.render(w, http.StatusOK, "index.html", nil)
}

// serveNotFound answers every unknown path and key alike, so a probe learns
// nothing about which sessions exist.
func (s *Server) serveNotFound(w http.ResponseWriter, _ *http.Request) {
	s.render(w, http.StatusNotFound, "notfound.html", nil)
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		s.log.Debug("web: write page", "page", name, "err", err)
	}
}
