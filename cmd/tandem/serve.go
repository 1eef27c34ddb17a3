package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/journal"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/metrics"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/spool"
	"github.com/tandem-sh/tandem/internal/stdio"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/target"
	"github.com/tandem-sh/tandem/internal/web"
)

type serveFlags struct {
	config    string
	workspace string
	web       string
	dataDir   string
	store     string // --store: "" for SQLite in the data dir, or a postgres:// URL
	logLevel  string
	logFormat string        // text or json
	grace     time.Duration // how long SIGTERM lets running commands finish
	http      string        // HTTP mode's listener; "" serves stdio
	tlsCert   string
	tlsKey    string
	insecure  bool   // --insecure-http: plain HTTP on a non-loopback address
	advertise string // --advertise-url: how the other nodes of a cluster reach this one
}

func serveCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP over stdio (what MCP clients launch), or over HTTP with --http",
		Long: "Serve MCP over stdio. With no --config, one sandboxed local target named \"local\" is offered, " +
			"rooted at the current directory. The browser terminal listens on --web (loopback). " +
			"With --http ADDR, serve many agents over Streamable HTTP at /mcp on that address instead; " +
			"each request needs a bearer token (tandem token issue).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	c.Flags().StringVar(&f.config, "config", "", "path of tandem.yaml (default: none, the embedded defaults)")
	c.Flags().StringVar(&f.web, "web", "127.0.0.1:7777", "address of the browser terminal; a taken port falls back to a free one")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the local target's workspace, without --config (default: the current directory)")
	c.Flags().StringVar(&f.dataDir, "data-dir", "", "state directory (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&f.store, "store", "", "where sessions, approvals and the audit log are kept: postgres://user@host:port/db (or postgresql://…) shares them between nodes (default: SQLite in the data dir)")
	c.Flags().StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	c.Flags().StringVar(&f.logFormat, "log-format", "text", "text, or json for a log collector")
	c.Flags().DurationVar(&f.grace, "shutdown-grace", 10*time.Second, "on SIGTERM or Ctrl-C: how long running commands may finish (no new sessions meanwhile) before every session ends")
	c.Flags().StringVar(&f.http, "http", "", "serve MCP over Streamable HTTP at /mcp on this address (host:port, port 0 picks one) instead of stdio; every request needs a bearer claim")
	c.Flags().StringVar(&f.tlsCert, "tls-cert", "", "with --http: serve HTTPS with this certificate (PEM)")
	c.Flags().StringVar(&f.tlsKey, "tls-key", "", "with --http: the certificate's private key (PEM)")
	c.Flags().StringVar(&f.advertise, "advertise-url", "", "with a cluster (cluster.secretFile and --store postgres://): the URL the other nodes reach this one at (default cluster.url, else the --http address)")
	c.Flags().BoolVar(&f.insecure, "insecure-http", false, "with --http: allow plain HTTP on a non-loopback address (bearer tokens then cross the network in clear text)")
	return c
}

func serve(ctx context.Context, f serveFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	cfg, err := loadConfig(f.config, f.workspace, home)
	if err != nil {
		return err
	}
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = defaultDataDir(home)
	}
	spoolDir := filepath.Join(dataDir, "spool")
	for _, d := range []string{dataDir, spoolDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	// Session run dirs (FIFOs, TMPDIR) live outside the data dir, in a
	// private directory of the system temp dir, which no sandbox may read.
	runDir, err := os.MkdirTemp("", "tandem-run-")
	if err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	defer os.RemoveAll(runDir)
	refused, err := unsafeWorkspaces(cfg, f.config != "" || f.workspace != "", home, dataDir, runDir)
	if err != nil {
		return err
	}
	for name, why := range refused {
		log.Warn("local target refused", "target", name, "why", why)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}

	// A signal (ctx) starts a graceful shutdown: new sessions are refused
	// and running commands may finish within the grace; then everything
	// stops. Until then calls, pages and the store keep being served.
	signalled := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	hm, err := newHTTPMode(f, cfg, dataDir, log)
	if err != nil {
		return err
	}
	ln, err := hm.listen(ctx, f, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	base := hm.scheme() + "://" + ln.Addr().String()
	_, shared := storeKind(f.store)
	nodeURL, err := advertiseURL(f, cfg, base, shared, hm, log)
	if err != nil {
		return err
	}
	rec, err := openRecord(ctx, dataDir, f.store, nodeURL, log)
	if err != nil {
		return err
	}
	defer rec.close(log)
	if err := hm.useStore(ctx, rec.st); err != nil {
		return err
	}
	// The gauges read the manager and the broker when Prometheus scrapes.
	var sessions *session.Manager
	var broker *approval.Broker
	met := metrics.New(metrics.Gauges{ActiveSessions: func() int { return sessions.Count() },
		PendingApprovals: func() int { return len(broker.Pending()) }})
	sessions = session.NewManager(&session.Options{
		OnEnd:         func(_ *session.Session, reason string) { met.SessionEnded(reason) },
		Journal:       rec.journal,
		Logger:        log,
		IdleTimeout:   time.Duration(cfg.Limits.IdleTimeout),
		MaxLifetime:   time.Duration(cfg.Limits.MaxLifetime),
		Spool:         &spool.Dir{Path: spoolDir, Inline: spool.DefaultInline},
		RecordingsDir: filepath.Join(dataDir, "recordings"),
	})
	broker = newBroker(cfg, countedJournal{rec.journal.Approvals(), met}, log)
	leasesDone := make(chan struct{})
	go func() { sessions.Run(ctx); close(leasesDone) }()
	policies, err := compilePolicies(cfg, hm.on())
	if err != nil {
		return err
	}
	srv := mcp.New(mcp.Deps{
		Policy:        policies,
		Observer:      met,
		Approvals:     broker,
		Sessions:      sessions,
		Audit:         rec.audit,
		AuditContinue: cfg.Audit.OnFailure == config.AuditContinue,
		Tenant:        stdioTenant(cfg),
		KnownTenant:   func(name string) bool { _, ok := cfg.Tenant(name); return ok },
		RequireClaims: hm.on(),
		Targets: &target.Resolver{
			Config: cfg, Stdio: !hm.on(), Self: self, Home: home, AgentSocket: os.Getenv("SSH_AUTH_SOCK"),
			PinFile: filepath.Join(dataDir, "known_hosts"),
			RunDir:  runDir, Env: shellEnv(), User: currentUser(), Refused: refused,
			Implicit: implicitTarget(f, cfg), CheckRoot: func(dir string) error { return checkRoot(dir, home, dataDir, runDir) },
		},
		MonitorURL:        func(key string) string { return web.MonitorURL(cmp.Or(nodeURL, base), key) },
		CommandTimeout:    time.Duration(cfg.Limits.CommandTimeout),
		InlineOutputBytes: cfg.Limits.InlineOutputBytes,
		Logger:            log,
		Version:           version,
		Elsewhere:         elsewhere(nodeURL, rec, log),
		CommandRecorded:   commandRecorded(nodeURL, rec),
	})
	fencedErr := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-rec.fenced:
			sessions.EndAll(journal.EndNodeLost)
			fencedErr <- errors.New("this node was declared lost by the other nodes (its heartbeat lapsed for longer than the lease); its sessions ended with node_lost: restart it")
			cancel()
			return
		case <-signalled.Done():
		}
		log.Info("shutting down: no new sessions; running commands may finish", "grace", f.grace)
		denyPending(ctx, broker, log)
		dctx, dcancel := context.WithTimeout(ctx, f.grace)
		sessions.Drain(dctx)
		// The calls in flight (those just denied among them) answer before
		// the listener closes.
		_ = srv.Settle(dctx)
		dcancel()
		cancel()
	}()

	opTok, err := dashboardToken(cfg, dataDir)
	if err != nil {
		return err
	}
	webOpts := &web.Options{Logger: log, Recordings: sessions, PublicHosts: cfg.Web.PublicHosts,
		Operator: &web.Operator{Token: opTok, Approvals: broker, Sessions: dashSessions{sessions}, Audit: dashAudit{rec.st}}}
	webOpts.Routes = map[string]http.Handler{}
	if hm.on() {
		webOpts.Routes = hm.routes(srv, base)
	}
	if nodeURL != "" {
		node, err := newNode(cfg, rec, met, log)
		if err != nil {
			return err
		}
		webOpts.Routes["/mcp"] = node.MCP(webOpts.Routes["/mcp"], mcpRouting(hm, sessions, rec))
		webOpts.Wrap = func(h http.Handler) http.Handler {
			return node.Monitor(h, func(key string) bool { _, ok := sessions.ByMonitorKey(key); return ok })
		}
		maps.Copy(webOpts.Routes, internalRoutes(node, sessions, broker))
		p := newPeers(node, rec.st, broker, log)
		webOpts.Operator.Approvals = clusterDesk{broker, p}
		webOpts.Operator.Sessions = clusterSessions{dashSessions{sessions}, p}
		go p.listen(ctx, rec.st.(*postgres.DB), func(ctx context.Context) { _ = hm.revs.Refresh(ctx) })
		log.Info("cluster node", "node", rec.inst.ID, "url", nodeURL)
	}
	webOpts.Routes["GET /metrics"] = met.Handler()
	webOpts.Routes["GET /healthz"] = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	webOpts.Routes["GET /readyz"] = readyz(srv)
	// Downstream tandems forward their approvals here (policy forward).
	webOpts.Routes["POST /api/approvals"] = forward.Handler(forward.Either(forward.Token(opTok), hm.approver), srv.Forwarded)
	webDone := make(chan error, 1)
	go func() { webDone <- web.New(webSessions{sessions}, webOpts).Serve(ctx, ln) }()
	targets := targetLines(cfg, refused)
	if len(targets) == 0 {
		log.Warn("no target is configured: every ssh_connect that names a target will fail; add targets to the config (see the README's tandem.yaml)", "config", f.config)
	}
	plain := f.logFormat != "json" // stderr may carry lines that are not log records
	live := liveInfo{PID: os.Getpid(), Mode: "stdio", Web: base, Started: time.Now().UTC(), SignIn: web.DashboardURL(base, opTok)}
	if hm.on() {
		live.Mode, live.MCP = "http", base+"/mcp"
	}
	announceDashboard(stderr, log, plain, rec.inst, live)
	if hm.on() {
		log.Info("tandem serving MCP over HTTP", "endpoint", base+"/mcp", "dataDir", dataDir, "targets", strings.Join(targets, "; "))
		if plain {
			fmt.Fprintf(stderr, "tandem: MCP endpoint %s/mcp\n", base)
		}
		err = hm.run(ctx)
	} else {
		log.Info("tandem serving MCP over stdio", "web", base, "dataDir", dataDir, "targets", strings.Join(targets, "; "))
		if isTerminal(stdin) {
			if plain {
				fmt.Fprintln(stderr, newcomerHint(self, f, cfg, refused))
			} else {
				log.Info(newcomerHint(self, f, cfg, refused))
			}
		}
		guard := stdio.New(stdin, stdout, log)
		out := guard.Writer() // whole lines per call, as Run needs
		err = srv.Run(ctx, &sdk.IOTransport{Reader: guard.Reader(), Writer: out, MaxLineLength: stdio.MaxLine + 1}, out)
	}
	// The client went away (stdio) or the server stopped: nobody is left
	// to run what waits for approval.
	denyPending(ctx, broker, log)
	cancel()
	<-leasesDone
	if werr := <-webDone; werr != nil && !errors.Is(werr, context.Canceled) {
		log.Warn("web server", "err", werr)
	}
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	select {
	case err := <-fencedErr:
		return err
	default:
		return nil
	}
}

// denyPending denies, with server_shutdown, every approval still pending
// when the server stops, and every one asked for after: the calls that
// wait for them end with approval_denied, running nothing, and the
// store's rows and the audit say so (the other nodes' dashboards drop
// them).
func denyPending(ctx context.Context, b *approval.Broker, log *slog.Logger) {
	if n := b.Close(context.WithoutCancel(ctx)); n > 0 {
		log.Info("shutting down: denied the pending approvals", "count", n, "reason", approval.ReasonShutdown)
	}
}

// webSessions lets the browser terminal open a session by capability key.
type webSessions struct{ m *session.Manager }

// Terminal opens the live session a capability key names.
func (w webSessions) Terminal(key string) (web.Terminal, bool) {
	s, ok := w.m.ByMonitorKey(key)
	if !ok {
		return nil, false
	}
	return webTerminal{s}, true
}

type webTerminal struct{ *session.Session }

// Name is the session's name, shown (escaped) on the page.
func (t webTerminal) Name() string { return t.Session.Name }

// Input types a viewer's keys, named for the records of what they run.
func (t webTerminal) Input(ctx context.Context, p []byte) error {
	return t.Session.Input(session.WithViewer(ctx, web.ViewerFrom(ctx)), p)
}

func loadConfig(path, workspace, home string) (*config.Config, error) {
	switch {
	case path != "" && workspace != "":
		return nil, errors.New("--workspace applies without --config only; set workspace on the target in tandem.yaml")
	case path != "":
		return config.Load(path, home)
	case workspace != "":
		abs, err := filepath.Abs(workspace)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--workspace %s is not an existing directory", workspace)
		}
		return config.Default(abs), nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return config.Default(wd), nil
}

// unsafeWorkspaces finds sandboxed local targets whose grants would give a
// session tandem's own state (database, audit, spools, recordings) or the
// run dirs of other sessions. A workspace chosen on purpose (config file or
// --workspace) that does this is an error at start; the implicit one (the
// current directory) is refused only when a session is asked for, with the
// same message, so that `tandem serve` from $HOME still serves SSH targets.
func unsafeWorkspaces(cfg *config.Config, chosen bool, home, dataDir, runDir string) (map[string]string, error) {
	refused := map[string]string{}
	for _, tt := range tenantTargets(cfg) {
		t, key := tt.t, target.RefusedKey(tt.tenant, tt.t.Name)
		if t.Kind != "local" || t.Sandbox == "none" {
			continue
		}
		grants := append(append([]string{t.Workspace}, sandbox.DefaultReadOnly()...), t.ReadOnly...)
		for _, g := range grants {
			for _, own := range []struct{ what, path string }{{"data dir", dataDir}, {"run dir", runDir}} {
				if !sandbox.Covers(g, own.path) {
					continue
				}
				why := fmt.Sprintf("local target %q: the sandbox grant %s covers tandem's %s %s, so a session could read or rewrite tandem's own state; "+
					"pass --workspace DIR with a project directory, or --data-dir outside %s", t.Name, g, own.what, own.path, g)
				if chosen {
					return nil, errors.New(why)
				}
				if _, seen := refused[key]; !seen {
					refused[key] = why
				}
			}
		}
		if _, seen := refused[key]; !seen && !chosen {
			if what := broadWorkspace(t.Workspace, home); what != "" {
				refused[key] = fmt.Sprintf("local target %q: the workspace would be %s, tandem's current directory, which is %s: "+
					"a session could change anything in it. Pass --workspace DIR with the project directory (or set workspace in tandem.yaml)",
					t.Name, t.Workspace, what)
			}
		}
	}
	return refused, nil
}

// implicitTarget names the local target whose workspace is only tandem's
// current directory, which the client's MCP roots may replace (stdio).
func implicitTarget(f serveFlags, cfg *config.Config) string {
	if f.config != "" || f.workspace != "" || f.http != "" || len(cfg.Targets) != 1 {
		return ""
	}
	return cfg.Targets[0].Name
}

// checkRoot vets a workspace that the client's MCP roots name, as an
// implicit one: not a broad directory, and no grant over tandem's state.
func checkRoot(dir, home, dataDir, runDir string) error {
	if what := broadWorkspace(dir, home); what != "" {
		return fmt.Errorf("the client's root %s is %s: a session could change anything in it", dir, what)
	}
	for _, own := range []string{dataDir, runDir} {
		if sandbox.Covers(dir, own) {
			return fmt.Errorf("the client's root %s holds tandem's own state (%s)", dir, own)
		}
	}
	return nil
}

// broadWorkspace says why dir is no place to let an agent write everywhere
// (the root, a home directory, a system directory), or "" if it is fine.
// It applies to the implicit workspace only: one chosen on purpose is the
// user's call.
func broadWorkspace(dir, home string) string {
	dir = filepath.Clean(dir)
	switch {
	case dir == "/":
		return "the root directory"
	case home != "" && dir == filepath.Clean(home):
		return "your home directory"
	}
	for _, exact := range []string{"/home", "/root", "/tmp", "/var", "/opt", "/srv", "/mnt", "/media"} {
		if dir == exact {
			return "a system directory"
		}
	}
	for _, tree := range []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc", "/sys", "/run"} {
		if dir == tree || strings.HasPrefix(dir, tree+"/") {
			return "a system directory"
		}
	}
	return ""
}

// stdioTenant is the tenant a stdio client acts as: the default one, or
// the only configured tenant.
func stdioTenant(cfg *config.Config) string {
	if len(cfg.Tenants) == 1 {
		return cfg.Tenants[0].Name
	}
	return config.DefaultTenant
}

// tenantTarget is a target with the tenant it belongs to.
type tenantTarget struct {
	tenant string
	t      config.Target
}

// tenantTargets lists every target with its tenant: the top-level ones
// belong to the default tenant.
func tenantTargets(cfg *config.Config) []tenantTarget {
	var out []tenantTarget
	for _, t := range cfg.Targets {
		out = append(out, tenantTarget{config.DefaultTenant, t})
	}
	for _, tn := range cfg.Tenants {
		for _, t := range tn.Targets {
			out = append(out, tenantTarget{tn.Name, t})
		}
	}
	return out
}

// targetLines describes every target for the startup log, named
// tenant/target where tenants are configured; a local target refused for
// its workspace says so, so the line never lists it as if it served.
func targetLines(cfg *config.Config, refused map[string]string) []string {
	var out []string
	for _, tt := range tenantTargets(cfg) {
		t := tt.t
		name := t.Name
		if len(cfg.Tenants) > 0 {
			name = tt.tenant + "/" + t.Name
		}
		desc := name + " (" + t.Kind
		switch {
		case t.Kind == "local":
			desc += ", workspace " + t.Workspace
			if t.Sandbox == "none" {
				desc += ", unsandboxed"
			}
		default:
			desc += ", " + t.User + "@" + t.Host
		}
		if refused[target.RefusedKey(tt.tenant, t.Name)] != "" {
			desc += ", REFUSED: see the warning above"
		}
		out = append(out, desc+")")
	}
	return out
}

func defaultDataDir(home string) string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "tandem")
	}
	return filepath.Join(home, ".local", "state", "tandem")
}

// shellEnv is the environment local shells start from: enough to work,
// never tandem's own secrets.
func shellEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	o := &slog.HandlerOptions{Level: l}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// isTerminal reports whether r is a terminal: a person ran tandem serve by
// hand, where an MCP client would have given it a pipe.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newcomerHint is the one line a person who started tandem serve by hand
// sees: what it is waiting for and how to hand it to a client instead.
func newcomerHint(self string, f serveFlags, cfg *config.Config, refused map[string]string) string {
	bin, build := self, ""
	if strings.Contains(self, "go-build") { // go run: a throwaway binary, built again at once
		bin, build = "$HOME/.local/bin/tandem", "go build -o $HOME/.local/bin/tandem ./cmd/tandem && "
	}
	args := ""
	switch t := cfg.Targets; {
	case f.config != "":
		abs, _ := filepath.Abs(f.config)
		args = " --config " + abs
	case len(t) == 1 && refused[target.RefusedKey(config.DefaultTenant, t[0].Name)] != "":
		args = " --workspace /path/to/your/project"
	case len(t) == 1:
		args = " --workspace " + t[0].Workspace
	}
	return "tandem speaks MCP over stdin/stdout and is meant to be started by an MCP client; add it with:\n  " +
		build + "claude mcp add tandem -- " + bin + " serve" + args +
		"\n(other clients: see the README). Waiting for MCP messages; Ctrl-D or Ctrl-C quits."
}

// Owner names the tenant and actor of an HTTP-mode session for the page;
// a stdio session (no actor) shows none.
func (t webTerminal) Owner() string {
	c := t.Session.Caller()
	if c.Actor == "" {
		return ""
	}
	return c.Tenant + " · " + c.Actor
}
