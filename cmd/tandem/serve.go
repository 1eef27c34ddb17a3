package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/server"
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
			"rooted at --workspace, else at the client's first MCP root, else at the current directory. The browser terminal listens on --web (loopback). " +
			"With --http ADDR, serve many agents over Streamable HTTP at /mcp on that address instead; " +
			"each request needs a bearer token (tandem token issue).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	c.Flags().StringVar(&f.config, "config", "", "path of tandem.yaml (default: none, the embedded defaults)")
	c.Flags().StringVar(&f.web, "web", "127.0.0.1:7777", "address of the browser terminal; a taken port falls back to a free one")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the local target's workspace; with --config, the workspace of its one local target (default: with --config, the file's; without, the client's first MCP root, else the current directory)")
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

// serve runs one tandem until its client leaves or a signal ends it.
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
	o := server.Options{ConfigPath: f.config, Workspace: f.workspace, Web: f.web, DataDir: f.dataDir, Store: f.store,
		Grace: f.grace, HTTP: f.http, TLSCert: f.tlsCert, TLSKey: f.tlsKey, InsecureHTTP: f.insecure,
		Advertise: f.advertise, Version: version, Logger: log,
		// Where namespaces misbehave, and for tests of the fallback.
		NoNetNamespace: os.Getenv("TANDEM_NETNS") == "off"}
	if f.logFormat != "json" { // stderr may carry lines that are not log records
		o.Plain, o.SignInLink = stderr, isTerminal(stderr)
	}
	if f.http == "" && isTerminal(stdin) {
		self, _ := os.Executable()
		o.Hint = func(refused map[string]string) string { return newcomerHint(self, f, cfg, refused) }
	}
	stop, err := cpuProfile(os.Getenv("TANDEM_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stop()
	srv, err := server.New(ctx, cfg, o)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Serve(ctx, stdin, stdout)
}

// loadConfig reads --config, with --workspace naming its one local
// target's workspace when both are given, or the embedded defaults.
func loadConfig(path, workspace, home string) (*config.Config, error) {
	abs := ""
	if workspace != "" {
		var err error
		if abs, err = filepath.Abs(workspace); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--workspace %s is not an existing directory", workspace)
		}
	}
	switch {
	case path != "":
		return config.LoadWorkspace(path, home, abs)
	case abs != "":
		return config.Default(abs), nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	return config.Default(wd), nil
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
