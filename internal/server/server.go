// Package server owns one running tandem: it opens the durable record,
// the sessions, the policies and approvals, the web listener, the MCP
// transport (stdio or Streamable HTTP) and, on a shared store, the
// cluster node; and it owns their lifecycle in one place (start, drain on
// a signal, fence when the cluster declares the node lost, shutdown and
// close). cmd/tandem turns flags into Options; everything a serving
// process does lives here.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/cluster"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/journal"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/metrics"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/stdio"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/target"
	"github.com/tandem-sh/tandem/internal/web"
)

// Options are what the command line chose for one tandem.
type Options struct {
	ConfigPath   string        // --config; "" serves the embedded defaults
	Workspace    string        // --workspace: the local target's, with or without --config
	Web          string        // the browser pages' address, in stdio mode
	DataDir      string        // "" is DefaultDataDir
	Store        string        // "" for SQLite in the data dir, or a postgres:// URL
	Grace        time.Duration // how long a signal lets running commands finish
	HTTP         string        // HTTP mode's listener; "" serves stdio
	TLSCert      string
	TLSKey       string
	InsecureHTTP bool   // plain HTTP on a non-loopback address
	Advertise    string // how the other nodes of a cluster reach this one
	Version      string
	Logger       *slog.Logger
	// Plain receives the lines for a person beside the log (the MCP
	// endpoint, the newcomer hint): stderr with text logs, nil with JSON
	// logs, where nothing but log records may go.
	Plain io.Writer
	// SignInLink lets Plain carry the dashboard's sign-in link, which
	// holds the operator token: only when it is a terminal.
	SignInLink bool
	// NoNetNamespace runs sandboxed local sessions without network
	// namespaces, under the fallback seccomp filter (target.Resolver's
	// NoNetNamespace): TANDEM_NETNS=off.
	NoNetNamespace bool
	// Hint, when a person started tandem at a terminal (stdio mode), says
	// what it waits for; refused names the local targets refused.
	Hint func(refused map[string]string) string
}

// Server is one tandem process's serving parts, opened by New and run
// once by Serve.
type Server struct {
	o        *Options
	cfg      *config.Config
	log      *slog.Logger
	dataDir  string
	refused  map[string]string
	hm       *httpMode
	ln       net.Listener
	base     string // the listener's URL
	nodeURL  string // how the other nodes reach this one; "" alone
	rec      *durable
	met      *metrics.Metrics
	sessions *session.Manager
	broker   *approval.Broker
	mcp      *mcp.Server
	opTok    string
	previews *previews // forwarded ports (preview.go)
	node     *cluster.Node
	policies func(tenant, target string) mcp.Policy // each session's, for the page's transfers too
	closers  []func()                               // Close runs them, last first
}

// New opens everything a tandem serves with, or nothing: on an error what
// it had opened is closed again.
func New(ctx context.Context, cfg *config.Config, o Options) (_ *Server, err error) {
	s := &Server{o: &o, cfg: cfg, log: o.Logger}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	home, _ := os.UserHomeDir()
	s.dataDir = cmp.Or(o.DataDir, DefaultDataDir(home))
	spoolDir := filepath.Join(s.dataDir, "spool")
	for _, d := range []string{s.dataDir, spoolDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("data dir: %w", err)
		}
	}
	// Session run dirs (FIFOs, TMPDIR) live outside the data dir, in a
	// private directory of the system temp dir, which no sandbox may read.
	runDir, err := os.MkdirTemp("", "tandem-run-")
	if err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	s.closers = append(s.closers, func() { os.RemoveAll(runDir) })
	if err := ownFilesInWorkspace(&o, cfg); err != nil {
		return nil, err
	}
	if s.refused, err = unsafeWorkspaces(cfg, o.ConfigPath != "" || o.Workspace != "", home, s.dataDir, runDir); err != nil {
		return nil, err
	}
	for name, why := range s.refused {
		s.log.Warn("local target refused", "target", name, "why", why)
	}
	warnOpenNetwork(cfg, s.log)
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	if s.hm, err = newHTTPMode(&o, cfg, s.dataDir, s.log); err != nil {
		return nil, err
	}
	if s.ln, err = s.hm.listen(ctx, &o, s.log); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.ln.Close() })
	s.base = s.hm.scheme() + "://" + s.ln.Addr().String()
	_, shared := storeKind(o.Store)
	if s.nodeURL, err = advertiseURL(&o, cfg, s.base, shared, s.hm, s.log); err != nil {
		return nil, err
	}
	if s.rec, err = openRecord(ctx, s.dataDir, o.Store, s.nodeURL, s.log); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() { s.rec.close(s.log) })
	if err := s.hm.useStore(ctx, s.rec.st); err != nil {
		return nil, err
	}
	// The gauges read the manager and the broker when Prometheus scrapes.
	s.met = metrics.New(metrics.Gauges{ActiveSessions: func() int { return s.sessions.Count() },
		PendingApprovals: func() int { return len(s.broker.Pending()) }})
	s.sessions = session.NewManager(&session.Options{
		OnEnd:         func(_ *session.Session, reason string) { s.met.SessionEnded(reason) },
		Journal:       s.rec.journal,
		Logger:        s.log,
		IdleTimeout:   time.Duration(cfg.Limits.IdleTimeout),
		MaxLifetime:   time.Duration(cfg.Limits.MaxLifetime),
		Spool:         &spool.Dir{Path: spoolDir, Inline: spool.DefaultInline, MaxFile: cfg.Limits.KeptOutputBytes / 2},
		RecordingsDir: filepath.Join(s.dataDir, "recordings"),

		KeptOutputBytes: cfg.Limits.KeptOutputBytes,
		RecordingBytes:  cfg.Limits.RecordingBytes,
	})
	s.broker = newBroker(cfg, countedJournal{s.rec.journal.Approvals(), s.met}, s.log)
	policies, err := compilePolicies(cfg, s.hm.on())
	if err != nil {
		return nil, err
	}
	s.policies = policies
	targets := &target.Resolver{
		Config: cfg, Stdio: !s.hm.on(), Self: self, Home: home, AgentSocket: os.Getenv("SSH_AUTH_SOCK"),
		PinFile: filepath.Join(s.dataDir, "known_hosts"),
		RunDir:  runDir, Env: shellEnv(), User: currentUser(), Refused: s.refused,
		Implicit: implicitTarget(&o, cfg), CheckRoot: func(dir string) error { return checkRoot(dir, home, s.dataDir, runDir) },
		Log: s.log, NoNetNamespace: o.NoNetNamespace,
	}
	// Whether sessions get network namespaces is said at start, not at
	// the first connect.
	targets.CheckNetwork()
	targets.CheckSecretFiles()
	s.previews = newPreviews(s)
	s.closers = append(s.closers, func() { _ = s.previews.Close() })
	s.mcp = mcp.New(mcp.Deps{
		Previews:      s.previews,
		Policy:        policies,
		Observer:      s.met,
		Approvals:     s.broker,
		Sessions:      s.sessions,
		Audit:         s.rec.audit,
		AuditContinue: cfg.Audit.OnFailure == config.AuditContinue,
		Tenant:        stdioTenant(cfg),
		KnownTenant:   func(name string) bool { _, ok := cfg.Tenant(name); return ok },
		RequireClaims: s.hm.on(),

		Targets:           targets,
		MonitorURL:        func(key string) string { return web.MonitorURL(cmp.Or(s.nodeURL, s.base), key) },
		CommandTimeout:    time.Duration(cfg.Limits.CommandTimeout),
		InlineOutputBytes: cfg.Limits.InlineOutputBytes,
		Logger:            s.log,
		Version:           o.Version,
		Elsewhere:         elsewhere(s.nodeURL, s.rec, s.log),
		CommandRecorded:   commandRecorded(s.nodeURL, s.rec),
		Egress:            newEgress(ctx, cfg, s.ln.Addr(), s.log),
		UploadBytes:       cfg.Limits.UploadBytes,
		DownloadBytes:     cfg.Limits.DownloadBytes,
		Denied: func(act approval.Action, rule string) {
			if sess, ok := s.sessions.ByID(act.SessionID); ok {
				sess.NoteDenied(session.Denial{Tool: act.Tool, Command: act.Command, Rule: rule, At: time.Now()})
			}
		},
	})
	if s.opTok, err = dashboardToken(cfg, s.dataDir); err != nil {
		return nil, err
	}
	if s.nodeURL != "" {
		if s.node, err = newNode(cfg, s.rec, s.met, s.log); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close releases what New opened: the record (after every session has
// ended), the listener and the run dir.
func (s *Server) Close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Serve serves MCP (over stdio on stdin and stdout, or over HTTP), the
// browser pages and, on a cluster, the other nodes, until the client
// leaves (stdio), the node is fenced, or ctx ends. The end of ctx (a
// signal) starts a graceful shutdown: new sessions are refused and
// running commands may finish within the grace; then everything stops.
func (s *Server) Serve(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	signalled := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	leasesDone := make(chan struct{})
	go func() { s.sessions.Run(ctx); close(leasesDone) }()
	fenced := make(chan error, 1)
	go func() { fenced <- s.drainOnSignal(ctx, signalled, cancel) }()
	webDone := make(chan error, 1)
	files := &humanFiles{policies: s.policies, audit: s.rec.audit, auditContinue: s.cfg.Audit.OnFailure == config.AuditContinue,
		upload: s.cfg.Limits.UploadBytes, download: s.cfg.Limits.DownloadBytes, log: s.log}
	go func() {
		webDone <- web.New(webSessions{s.sessions, s.broker, files}, s.webOptions(ctx)).Serve(ctx, s.ln)
	}()
	s.announce()
	var err error
	if s.hm.on() {
		err = s.hm.run(ctx)
	} else {
		maxLine := mcp.MessageBytes(s.cfg.Limits.UploadBytes)
		guard := stdio.NewSized(stdin, stdout, s.log, maxLine)
		out := guard.Writer() // whole lines per call, as Run needs
		err = s.mcp.Run(ctx, &sdk.IOTransport{Reader: guard.Reader(), Writer: out, MaxLineLength: maxLine + 1}, out)
	}
	// The client went away (stdio) or the server stopped: nobody is left
	// to run what waits for approval.
	s.denyPending(ctx)
	cancel()
	<-leasesDone
	if werr := <-webDone; werr != nil && !errors.Is(werr, context.Canceled) {
		s.log.Warn("web server", "err", werr)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return <-fenced
}

// drainOnSignal waits for the end of serving (ctx), a fence, or a signal.
// A fence ends every session with node_lost and stops serving, and is
// returned as the error Serve ends with. A signal denies the pending
// approvals, lets running commands finish within the grace, lets the
// calls in flight answer, then stops serving.
func (s *Server) drainOnSignal(ctx, signalled context.Context, stop context.CancelFunc) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.rec.fenced:
		s.sessions.EndAll(journal.EndNodeLost)
		stop()
		return errors.New("this node was declared lost by the other nodes (its heartbeat lapsed for longer than the lease); its sessions ended with node_lost: restart it")
	case <-signalled.Done():
	}
	s.log.Info("shutting down: no new sessions; running commands may finish", "grace", s.o.Grace)
	s.denyPending(ctx)
	dctx, dcancel := context.WithTimeout(ctx, s.o.Grace)
	defer dcancel()
	s.sessions.Drain(dctx)
	// The calls in flight (those just denied among them) answer before
	// the listener closes.
	_ = s.mcp.Settle(dctx)
	stop()
	return nil
}

// webOptions are the browser pages, the dashboard, and every other route
// of the one listener: /mcp in HTTP mode, the cluster's internal routes,
// the operations endpoints and forwarded approvals.
func (s *Server) webOptions(ctx context.Context) *web.Options {
	dash := dashSessions{m: s.sessions, names: s.mcp.StdioClient, st: s.rec.st, recordings: filepath.Join(s.dataDir, "recordings")}
	o := &web.Options{Logger: s.log, Recordings: s.sessions, PublicHosts: s.cfg.Web.PublicHosts,
		Operator: &web.Operator{Token: s.opTok, Approvals: s.broker, Sessions: dash, Audit: dashAudit{s.rec.st, s.mcp.StdioClient},
			Replays: dash, Admitted: s.auditTypingLink}, Previews: s.previews}
	o.Routes = map[string]http.Handler{}
	if s.hm.on() {
		o.Routes = s.hm.routes(s.mcp, s.base)
	}
	if s.node != nil {
		o.Routes["/mcp"] = s.node.MCP(o.Routes["/mcp"], mcpRouting(s.hm, s.sessions, s.rec))
		o.Wrap = func(h http.Handler) http.Handler {
			return s.node.Monitor(h, func(key string) bool { _, ok := s.sessions.ByMonitorKey(key); return ok })
		}
		maps.Copy(o.Routes, internalRoutes(s.node, s.sessions, s.broker))
		p := newPeers(s.node, s.rec.st, s.broker, s.log)
		o.Operator.Approvals = clusterDesk{s.broker, p}
		o.Operator.Sessions = clusterSessions{dash, p}
		go p.listen(ctx, s.rec.st.(*postgres.DB), func(ctx context.Context) { _ = s.hm.revs.Refresh(ctx) })
		s.log.Info("cluster node", "node", s.rec.inst.ID, "url", s.nodeURL)
	}
	o.Routes["GET /metrics"] = s.met.Handler()
	o.Routes["GET /healthz"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	o.Routes["GET /readyz"] = readyz(s.mcp)
	// Downstream tandems forward their approvals here (policy forward).
	o.Routes["POST /api/approvals"] = forward.Handler(forward.Either(forward.Token(s.opTok), s.hm.approver), s.mcp.Forwarded)
	return o
}

// auditTypingLink records a typing link the operator made: who may type
// in a session is part of what happened there. A session another node
// holds is recorded by its monitoring key's session, when it is known
// here, or without it.
func (s *Server) auditTypingLink(ctx context.Context, key string) error {
	rec := audit.Record{Time: time.Now(), Actor: "operator", Tool: audit.EventTypingLink, Event: audit.EventTypingLink, Outcome: audit.OutcomeOK}
	if sess, ok := s.sessions.ByMonitorKey(key); ok {
		rec.Tenant, rec.SessionID, rec.SessionName, rec.Target = sess.Caller().Tenant, sess.ID, sess.Name, sess.Target.Name
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.rec.audit.Append(ctx, rec)
	return err
}

// announce says what serves where: the log's startup line, the instance
// file for tandem dashboard-url, and the lines for a person.
func (s *Server) announce() {
	targets := targetLines(s.cfg, s.refused)
	if len(targets) == 0 {
		s.log.Warn("no target is configured: every ssh_connect that names a target will fail; add targets to the config (see the README's tandem.yaml)", "config", s.o.ConfigPath)
	}
	live := LiveInfo{PID: os.Getpid(), Mode: "stdio", Web: s.base, Started: time.Now().UTC(), SignIn: web.DashboardURL(s.base, s.opTok)}
	if s.hm.on() {
		live.Mode, live.MCP = "http", s.base+"/mcp"
	}
	announceDashboard(s.o, s.log, s.rec.inst, live)
	if s.hm.on() {
		mint := mintHint(s.o, s.cfg)
		s.log.Info("tandem serving MCP over HTTP", "endpoint", s.base+"/mcp", "dataDir", s.dataDir, "targets", strings.Join(targets, "; "), "token", mint)
		if s.o.Plain != nil {
			fmt.Fprintf(s.o.Plain, "tandem: MCP endpoint %s/mcp (every request needs a bearer token; mint one for a working day: %s)\n", s.base, mint)
		}
		return
	}
	s.log.Info("tandem serving MCP over stdio", "web", s.base, "dataDir", s.dataDir, "targets", strings.Join(targets, "; "))
	if s.o.Hint == nil {
		return
	}
	if hint := s.o.Hint(s.refused); s.o.Plain != nil {
		fmt.Fprintln(s.o.Plain, hint)
	} else {
		s.log.Info(hint)
	}
}

// denyPending denies, with server_shutdown, every approval still pending
// when the server stops, and every one asked for after: the calls that
// wait for them end with approval_denied, running nothing, and the
// store's rows and the audit say so (the other nodes' dashboards drop
// them).
func (s *Server) denyPending(ctx context.Context) {
	if n := s.broker.Close(context.WithoutCancel(ctx)); n > 0 {
		s.log.Info("shutting down: denied the pending approvals", "count", n, "reason", approval.ReasonShutdown)
	}
}
