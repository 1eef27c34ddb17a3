package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/claim"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/server"
)

// tokenFlags are what every token subcommand needs to find the key, the
// revocation list and the config the server runs with.
type tokenFlags struct {
	config  string
	dataDir string
	store   string // revoke: the store the servers share
}

func (f *tokenFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.config, "config", "", "the tandem.yaml the server runs with (default: the embedded defaults, tenant \"default\")")
	c.Flags().StringVar(&f.dataDir, "data-dir", "", "the server's state directory, which holds the signing key (default $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
}

func (f *tokenFlags) load() (*config.Config, string, error) {
	home, _ := os.UserHomeDir()
	dataDir := f.dataDir
	if dataDir == "" {
		dataDir = server.DefaultDataDir(home)
	}
	if f.config == "" {
		return config.Default(os.TempDir()), dataDir, nil
	}
	cfg, err := config.Load(f.config, home)
	return cfg, dataDir, err
}

func tokenCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "token",
		Short: "Mint, revoke and publish HTTP mode's bearer tokens",
		Long: "In HTTP mode every request carries a bearer token: a short-lived JWT naming the tenant, the actor, " +
			"the workspace and the tools of one agent run, signed with tandem's key in the data dir.",
		Args: cobra.NoArgs,
	}
	c.AddCommand(tokenIssueCmd(stdout), tokenRevokeCmd(stdout), tokenJWKSCmd(stdout))
	return c
}

type issueFlags struct {
	tokenFlags
	tenant, actor, workspace, sid, tools string
	roles                                []string
	ttl                                  time.Duration
	verbose                              bool
}

func tokenIssueCmd(stdout io.Writer) *cobra.Command {
	var f issueFlags
	c := &cobra.Command{
		Use:   "issue",
		Short: "Print a signed token for one agent run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, dataDir, err := f.load()
			if err != nil {
				return err
			}
			if f.tenant == "" || f.actor == "" {
				return errors.New("--tenant and --actor are required")
			}
			for _, r := range f.roles {
				if r != claim.RoleApprover {
					return fmt.Errorf("--roles: unknown role %q; the one role is %s", r, claim.RoleApprover)
				}
			}
			if err := cfg.Exists(f.tenant, f.workspace); err != nil {
				if f.config == "" {
					return fmt.Errorf("%w in the embedded defaults, which know only tenant %q: pass --config with the tandem.yaml the server runs with", err, config.DefaultTenant)
				}
				return fmt.Errorf("%w in %s: the server would refuse this token", err, f.config)
			}
			if max := time.Duration(cfg.Auth.MaxTTL); f.ttl <= 0 || f.ttl > max {
				return fmt.Errorf("--ttl must be more than 0 and at most auth.maxTTL (%s), got %s", max, f.ttl)
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			key, err := server.SigningKey(cfg, dataDir)
			if err != nil {
				return err
			}
			var tools []string
			if f.tools != "" {
				for t := range strings.SplitSeq(f.tools, ",") {
					if t = strings.TrimSpace(t); t != "" {
						tools = append(tools, t)
					}
				}
			}
			iss := &claim.Issuer{Key: key, Name: cfg.Auth.Issuer, Audience: cfg.Auth.Audience}
			tok, cl, err := iss.Issue(claim.IssueParams{Tenant: f.tenant, Actor: f.actor, Workspace: f.workspace,
				SID: f.sid, Tools: tools, Roles: f.roles, TTL: f.ttl})
			if err != nil {
				return err
			}
			if f.verbose {
				fmt.Fprintf(cmd.ErrOrStderr(), "jti %s, sid %s, expires %s\n", cl.JTI, cl.SID, cl.Expires.UTC().Format(time.RFC3339))
			}
			_, err = fmt.Fprintln(stdout, tok)
			return err
		},
	}
	f.add(c)
	c.Flags().StringVar(&f.tenant, "tenant", "", "the tenant the agent acts for (required)")
	c.Flags().StringVar(&f.actor, "actor", "", "who the agent acts for, e.g. a user or a CI job (required)")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the workspace whose targets it may use (default: all the tenant's targets)")
	c.Flags().StringVar(&f.sid, "sid", "", "the agent run; tokens with the same sid share sessions (default: the token's own id)")
	c.Flags().StringVar(&f.tools, "tools", "", "comma-separated tools it may call, e.g. ssh_connect,ssh_exec (default: all)")
	c.Flags().StringSliceVar(&f.roles, "roles", nil, "roles it carries: approver lets it answer approvals forwarded to this tandem (POST /api/approvals)")
	c.Flags().DurationVar(&f.ttl, "ttl", 15*time.Minute, "how long the token lives")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "also print the token's jti, sid and expiry to stderr")
	return c
}

func tokenRevokeCmd(stdout io.Writer) *cobra.Command {
	var f tokenFlags
	c := &cobra.Command{
		Use:   "revoke JTI",
		Short: "Refuse a token from now on, in every tandem process sharing the data dir or --store (within a second)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, dataDir, err := f.load()
			if err != nil {
				return err
			}
			st, _, err := server.OpenStore(cmd.Context(), dataDir, f.store)
			if err != nil {
				return err
			}
			defer st.Close()
			// No token outlives auth.maxTTL, so the entry is needed no longer.
			if err := st.Revoke(cmd.Context(), args[0], time.Now().Add(time.Duration(cfg.Auth.MaxTTL))); err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "revoked %s\n", args[0])
			return err
		},
	}
	f.add(c)
	c.Flags().StringVar(&f.store, "store", "", storeFlagHelp)
	c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		// Another issuer's jti may begin with '-', which reads as a flag.
		return fmt.Errorf("%w (a JTI that begins with '-' goes after --: tandem token revoke [flags] -- -JTI)", err)
	})
	return c
}

func tokenJWKSCmd(stdout io.Writer) *cobra.Command {
	var f tokenFlags
	c := &cobra.Command{
		Use:   "jwks",
		Short: "Print the public key set that verifies tandem's tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, dataDir, err := f.load()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return fmt.Errorf("data dir: %w", err)
			}
			key, err := server.SigningKey(cfg, dataDir)
			if err != nil {
				return err
			}
			b, err := claim.JWKS(key.Public().(ed25519.PublicKey))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, string(b))
			return err
		},
	}
	f.add(c)
	return c
}
