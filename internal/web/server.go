package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Terminal is one live session as a browser sees it. The session layer
// implements it; web only relays bytes between it and the page.
type Terminal interface {
	// Name is shown in the page header and title, escaped. Display only.
	Name() string
	// Owner says whose agent runs the session ("tenant · actor"), shown
	// escaped beside the name; "" shows nothing (stdio mode).
	Owner() string
	// Watch sends the scrollback, then live output, to fn until ctx ends or
	// the session ends (returns nil then). fn is called from one goroutine at
	// a time; an error from fn ends Watch with that error.
	Watch(ctx context.Context, fn func(p []byte) error) error
	// Input writes keystrokes from the human into the session.
	Input(ctx context.Context, p []byte) error
	// Resize sets the terminal size the human's browser window fits.
	Resize(ctx context.Context, cols, rows int) error
}

// EndReasoner is implemented by a Terminal that can say why its session
// ended (disconnected, idle_timeout, human_exit, …): the page shows it
// beside the link to the replay.
type EndReasoner interface {
	// EndReason is "" while the session lives.
	EndReason() string
}

// Statuser is implemented by a Terminal that can tell the monitoring
// page what the agent is doing, for the page's status strip.
type Statuser interface {
	// Status is the session as it stands; Viewers is filled in here.
	Status() SessionStatus
	// WatchStatus signals fn (it must not block) when the status may
	// have changed, until stop is called.
	WatchStatus(fn func()) (stop func())
}

// SessionStatus is what the monitoring page's status strip shows.
type SessionStatus struct {
	// Agent is idle, running (its command), waiting_approval,
	// waiting_human (it asked for the human) or human_running (a
	// command of the human's runs).
	Agent   string    `json:"agent"`
	Command string    `json:"command,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// Gate is how many of the human's commands the agent will be told
	// of before it acts again.
	Gate      int           `json:"gate"`
	Approvals []StripAction `json:"approvals,omitempty"`
	// Held are the session's approvals approved after the agent's call
	// stopped waiting: its next identical call runs each, until Expires.
	Held   []StripAction `json:"held,omitempty"`
	Denied []StripAction `json:"denied,omitempty"`
	// Viewers is how many browsers and tandem attach watch the session;
	// Watchers names them by kind (operator, admitted viewer, tandem
	// attach, browser (watching)), never by address.
	Viewers  int      `json:"viewers"`
	Watchers []string `json:"watchers,omitempty"`
	// Commands are the session's latest commands, whoever ran them, oldest
	// first: the page marks their lines in the terminal by their source.
	Commands []StripCommand `json:"commands,omitempty"`
	// Network lists the session's open connections through the egress
	// proxy and the latest it refused (a target with an allowlist).
	Network []StripConnection `json:"network,omitempty"`
	// Ports are the session's forwarded ports, linked (preview.go).
	Ports []StripPort `json:"ports,omitempty"`
}

// Redacted returns st with f applied to every text in it that a session
// can influence: command lines, the agent's message, argv held for
// approval, rule names, host names and reasons. A terminal whose session
// hides secrets from its viewers (redact.viewers) passes its redactor, so
// that a field added here is hidden too. st is not changed.
func (st SessionStatus) Redacted(f func(string) string) SessionStatus {
	st.Command = f(st.Command)
	actions := func(in []StripAction) []StripAction {
		out := append([]StripAction(nil), in...)
		for i := range out {
			out[i].Tool, out[i].Command, out[i].Rule, out[i].Cwd = f(out[i].Tool), f(out[i].Command), f(out[i].Rule), f(out[i].Cwd)
		}
		return out
	}
	st.Approvals, st.Held, st.Denied = actions(st.Approvals), actions(st.Held), actions(st.Denied)
	st.Commands = append([]StripCommand(nil), st.Commands...)
	for i := range st.Commands {
		st.Commands[i].Command = f(st.Commands[i].Command)
	}
	st.Network = append([]StripConnection(nil), st.Network...)
	for i := range st.Network {
		c := &st.Network[i]
		c.Target, c.Decision, c.Reason = f(c.Target), f(c.Decision), f(c.Reason)
	}
	return st
}

// StripConnection is one connection through the egress proxy as the
// strip names it: open (allowed or approved) or refused (refused or
// denied).
type StripConnection struct {
	Target   string    `json:"target"` // host:port
	Decision string    `json:"decision"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// StripCommand is one command as the page marks it.
type StripCommand struct {
	ID      string `json:"id"`
	Source  string `json:"source"` // agent or human
	Command string `json:"command"`
	Running bool   `json:"running"`
	Exit    *int   `json:"exit,omitempty"` // once it ended, when known
}

// StripAction is an action of the agent's that the strip names: one
// waiting for approval (ID, Expires) or one the policy refused (Rule, At).
type StripAction struct {
	ID      string `json:"id,omitempty"`
	Tool    string `json:"tool"`
	Command string `json:"command,omitempty"`
	Rule    string `json:"rule,omitempty"`
	// Cwd is the directory a command's approval is bound to: the same
	// command from another directory asks again.
	Cwd     string    `json:"cwd,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	At      time.Time `json:"at,omitzero"`
}

// HumanDesk is implemented by a Terminal whose agent can hand the session
// to the human (ssh_request_human): the page shows the agent's message,
// and a viewer who may type hands the session back with a note.
type HumanDesk interface {
	// HumanRequest is the open request: its id and the agent's message;
	// ok is false when none is open.
	HumanRequest() (id, message string, ok bool)
	// HandBack ends the open request id, with the human's note to the
	// agent; the viewer is ViewerFrom(ctx).
	HandBack(ctx context.Context, id, note string) error
	// WatchHumanRequest signals fn (it must not block) whenever a request
	// opens or ends, until stop is called.
	WatchHumanRequest(fn func()) (stop func())
}

// Sessions resolves the capability key of a monitoring URL to a live terminal.
// It reports false for unknown and ended sessions alike, so neither can be told
// apart from outside.
type Sessions interface {
	Terminal(key string) (Terminal, bool)
}

// Recordings finds the recording of an ended session by the capability key
// of its monitoring URL, so the same link replays the session once it is over.
// The session layer implements it.
type Recordings interface {
	// Recording returns the session's name (display only) and the path of
	// its finished asciicast v2 file. It reports false for unknown keys and
	// for sessions still running or still being written, alike.
	Recording(key string) (name, path string, ok bool)
}

// Options configures a [Server]. A nil *Options means all defaults.
type Options struct {
	// Logger receives connection events (debug) and failures (warn).
	// Nil means slog.Default().
	Logger *slog.Logger
	// Recordings lets a monitoring URL replay its session after it ended.
	// Nil means no replay: the URL of an ended session is not found.
	Recordings Recordings
	// PublicHosts are the host names, besides loopback ones, that requests
	// may name in their Host header (a reverse proxy's public name). Any
	// other Host is refused, which defeats DNS rebinding: a page of another
	// site whose name was re-pointed at 127.0.0.1 still sends its own name.
	PublicHosts []string
	// Routes are further handlers on the same listener, by ServeMux
	// pattern: /mcp and its OAuth metadata in HTTP mode. The Host check
	// applies to them too.
	Routes map[string]http.Handler
	// Wrap, if set, wraps every route but the Host check, which stays
	// outermost: a cluster node uses it to send a session's pages to the
	// node that holds the session.
	Wrap func(http.Handler) http.Handler
	// Operator turns on the operator dashboard at / and its API under
	// /api/, for whoever holds Operator.Token. Nil means no dashboard: /
	// explains tandem and every /api/ path is not found. New panics if
	// Operator lacks its Token, Approvals or Sessions.
	Operator *Operator
	// Previews, if set, serves /s/{key}/port/{port}/ (preview.go) and
	// lists forwarded ports on the page. Nil: no previews.
	Previews Previews
}

// Server serves monitoring pages and their WebSockets for the sessions it
// resolves. One Server is safe for any number of concurrent viewers.
type Server struct {
	sessions   Sessions
	recordings Recordings // nil: no replay
	operator   *Operator  // nil: no dashboard
	previews   Previews   // nil: no previews
	log        *slog.Logger
	pages      *template.Template // every assets/*.html
	handler    http.Handler

	// viewers counts open WebSocket handlers (terminals and dashboards),
	// so Serve returns only after every viewer is closed.
	viewers sync.WaitGroup

	// watching names each session's terminal viewers (operator, tandem
	// attach, admitted viewer, browser (watching), …), by monitoring key,
	// for the status strip.
	watchMu   sync.Mutex
	watching  map[string]map[int]string
	nextWatch int
}

// watch names one more viewer of key until the returned func is called.
func (s *Server) watch(key, who string) (leave func()) {
	s.watchMu.Lock()
	if s.watching == nil {
		s.watching = map[string]map[int]string{}
	}
	if s.watching[key] == nil {
		s.watching[key] = map[int]string{}
	}
	id := s.nextWatch
	s.nextWatch++
	s.watching[key][id] = who
	s.watchMu.Unlock()
	return func() {
		s.watchMu.Lock()
		defer s.watchMu.Unlock()
		delete(s.watching[key], id)
		if len(s.watching[key]) == 0 {
			delete(s.watching, key)
		}
	}
}

// watchers names who watches key now, sorted.
func (s *Server) watchers(key string) []string {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	out := make([]string, 0, len(s.watching[key]))
	for _, who := range s.watching[key] {
		out = append(out, who)
	}
	slices.Sort(out)
	return out
}

//go:embed assets
var assets embed.FS

// shutdownTimeout bounds how long Serve waits for requests in flight after
// its context ends.
const shutdownTimeout = 5 * time.Second

// New returns a Server that looks monitoring keys up in s, and then, for
// keys s does not know, in opts.Recordings. With opts.Operator it also
// serves the operator dashboard.
func New(s Sessions, opts *Options) *Server {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	srv := &Server{
		sessions:   s,
		recordings: o.Recordings,
		previews:   o.Previews,
		log:        o.Logger,
		pages:      template.Must(template.ParseFS(assets, "assets/*.html")),
	}
	if o.Operator != nil {
		checkOperator(o.Operator)
		op := *o.Operator
		srv.operator = &op
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /s/{key}", srv.servePage)
	mux.HandleFunc("GET /s/{key}/ws", srv.serveWS)
	mux.HandleFunc("GET /s/{key}/cast", srv.serveCast)
	mux.HandleFunc("GET /s/{key}/port/{port}/{rest...}", srv.servePreview)
	mux.HandleFunc("GET /s/{key}/port/{port}", srv.servePreview)
	mux.HandleFunc("POST /s/{key}/files", srv.serveUpload)
	mux.HandleFunc("GET /s/{key}/files", srv.serveDownload)
	mux.Handle("GET /assets/", srv.staticFiles(http.FileServerFS(assets)))
	if srv.operator != nil {
		api := http.NewServeMux()
		api.HandleFunc("GET /api/state", srv.serveState)
		api.HandleFunc("POST /api/approvals/{id}/decision", srv.serveDecision)
		api.HandleFunc("POST /api/sessions/{id}/watch", srv.serveWatch)
		api.HandleFunc("POST /api/admit", srv.serveAdmit)
		api.HandleFunc("GET /api/audit", srv.serveAudit)
		api.HandleFunc("GET /api/ws", srv.serveDashboardWS)
		api.HandleFunc("/api/", serveAPINotFound)
		mux.Handle("/api/", srv.operatorAPI(api))
		mux.HandleFunc("GET /{$}", srv.serveDashboard)
		if o.Operator.Replays != nil {
			mux.HandleFunc("GET /replays/{id}", srv.serveOperatorReplay)
			mux.HandleFunc("GET /replays/{id}/cast", srv.serveOperatorCast)
		}
	} else {
		mux.HandleFunc("GET /{$}", srv.serveIndex)
	}
	mux.HandleFunc("/", srv.serveNotFound)
	for pattern, h := range o.Routes {
		mux.Handle(pattern, h)
	}
	var h http.Handler = secureHeaders(mux)
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv.handler = checkHost(o.PublicHosts, h)
	return srv
}

// Handler returns the HTTP handler of all routes, for mounting beside other
// handlers (such as /mcp) on one listener. Its WebSockets close when the
// request context ends; [Server.Serve] arranges that on shutdown.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve accepts connections on ln until ctx ends, then shuts down gracefully:
// viewers get a "going away" close, requests in flight get up to 5 s.
// It closes ln, and returns nil after a clean shutdown. It returns only when
// every viewer it served is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	var err error
	select {
	case serr := <-served:
		err = fmt.Errorf("web: serve: %w", serr)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		if serr := hs.Shutdown(sctx); serr != nil {
			err = fmt.Errorf("web: shutdown: %w", serr)
		}
		<-served
	}
	stop() // ends the viewers: their requests' context derives from ctx
	s.viewers.Wait()
	return err
}

// MonitorURL returns the monitoring URL of the session with key, served at
// base (such as "http://127.0.0.1:7777").
func MonitorURL(base, key string) string {
	return strings.TrimRight(base, "/") + "/s/" + url.PathEscape(key)
}
