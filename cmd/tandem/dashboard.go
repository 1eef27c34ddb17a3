package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/web"
)

// The operator's files in the data dir: the dashboard token, and the base
// URL of the tandem that last started on it.
const (
	dashboardTokenFile = "dashboard.token"
	dashboardURLFile   = "dashboard.url"
)

// operatorToken reads the data dir's dashboard token, creating it (0600)
// on first use. Like a Jupyter token it is kept in the clear, so that
// `tandem dashboard-url` can print the link again; the file is the
// operator's alone.
func operatorToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, dashboardTokenFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if tok := strings.TrimSpace(string(b)); len(tok) >= 32 && tokenChars(tok) {
			return tok, nil
		}
		return "", fmt.Errorf("dashboard token %s must be at least 32 letters, digits, '-' or '_': delete it and tandem makes a new one", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("dashboard token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	tok := base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return operatorToken(dataDir) // another tandem made it first
	}
	if err != nil {
		return "", fmt.Errorf("dashboard token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("dashboard token: %w", err)
	}
	return tok, f.Close()
}

// sharedOperatorToken reads web.operatorTokenFile: a token the nodes of a
// cluster share, which must exist, be the operator's alone (0600) and be
// at least 32 letters, digits, '-' or '_'.
func sharedOperatorToken(path string) (string, error) {
	tok, err := readPrivateFile(path, "web.operatorTokenFile")
	if err != nil {
		return "", err
	}
	if len(tok) < 32 || !tokenChars(tok) {
		return "", fmt.Errorf("web.operatorTokenFile %s must hold at least 32 letters, digits, '-' or '_' (e.g. openssl rand -hex 32)", path)
	}
	return tok, nil
}

// dashboardToken is the serving tandem's operator token: the shared file
// when the config names one, else the data dir's.
func dashboardToken(cfg *config.Config, dataDir string) (string, error) {
	if cfg.Web.OperatorTokenFile != "" {
		return sharedOperatorToken(cfg.Web.OperatorTokenFile)
	}
	return operatorToken(dataDir)
}

// noteDashboard records where this tandem's dashboard is, for
// `tandem dashboard-url`.
func noteDashboard(dataDir, base string) error {
	return os.WriteFile(filepath.Join(dataDir, dashboardURLFile), []byte(base+"\n"), 0o600)
}

func dashboardURLCmd() *cobra.Command {
	var dataDir, webAddr, tokenFile string
	c := &cobra.Command{
		Use:   "dashboard-url",
		Short: "Print the operator dashboard's sign-in link again",
		Long: "Print the link that signs a browser in to the operator dashboard of the tandem that last started on " +
			"this data dir (each tandem process serves its own). The link holds the operator token: keep it to yourself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dataDir
			if dir == "" {
				home, _ := os.UserHomeDir()
				dir = defaultDataDir(home)
			}
			tok, err := sharedOperatorToken(tokenFile)
			if tokenFile == "" {
				tok, err = operatorToken(dir)
			}
			if err != nil {
				return err
			}
			base := ""
			if webAddr != "" {
				base = webBase(webAddr)
			} else if b, err := os.ReadFile(filepath.Join(dir, dashboardURLFile)); err == nil {
				base = strings.TrimSpace(string(b))
			} else {
				base = "http://127.0.0.1:7777"
			}
			fmt.Fprintln(cmd.OutOrStdout(), web.DashboardURL(base, tok))
			return nil
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "tandem's data dir (default: $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&webAddr, "web", "", "the dashboard's address (host:port, or a URL such as a balancer's https://…), if not the one the last tandem noted")
	c.Flags().StringVar(&tokenFile, "token-file", "", "the operator token file the nodes of a cluster share (web.operatorTokenFile), instead of the data dir's")
	return c
}

// dashSessions shows the session manager to the dashboard.
type dashSessions struct{ m *session.Manager }

func (d dashSessions) Sessions(context.Context) ([]web.SessionRow, error) {
	all := d.m.Overview()
	rows := make([]web.SessionRow, 0, len(all))
	for _, o := range all {
		rows = append(rows, web.SessionRow{ID: o.ID, Name: o.Name, Tenant: o.Tenant, Actor: o.Actor, Target: o.Target,
			Kind: o.Kind, Status: o.Status, LastCommand: o.LastCommand, CreatedAt: o.CreatedAt,
			LastActivity: o.LastActivity, EndedAt: o.EndedAt, Ended: o.Ended})
	}
	return rows, nil
}

func (d dashSessions) MonitorKey(_ context.Context, id string) (string, bool) {
	return d.m.MonitorKeyOf(id)
}

func (d dashSessions) Changes(fn func()) func() { return d.m.Changes(fn) }

// dashAudit searches the audit log for the dashboard.
type dashAudit struct{ st store.Store }

func (d dashAudit) Search(ctx context.Context, q web.AuditQuery) ([]web.AuditEntry, error) {
	limit := min(max(q.Limit, 1), 500)
	n := limit
	if q.Tool != "" || q.Outcome != "" {
		n = 5000 // filtered here, after the store's own filter
	}
	recs, err := d.st.TailAudit(ctx, n, store.AuditFilter{SessionName: q.Session, Tenant: q.Tenant})
	if err != nil {
		return nil, err
	}
	var out []web.AuditEntry
	for i := len(recs) - 1; i >= 0 && len(out) < limit; i-- {
		r := recs[i]
		if (q.Tool != "" && r.Tool != q.Tool) || (q.Outcome != "" && r.Outcome != q.Outcome) {
			continue
		}
		out = append(out, web.AuditEntry{Seq: r.Seq, Time: r.Time, Tenant: r.Tenant, Actor: r.Actor, SessionName: r.SessionName,
			Tool: r.Tool, Event: r.Event, Outcome: r.Outcome, Reason: r.Reason, ApprovalID: r.ApprovalID})
	}
	return out, nil
}

// tokenChars keeps a hand-edited token to what a cookie and a URL carry
// unchanged.
func tokenChars(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// webBase is the dashboard's base URL from --web: host:port means plain
// HTTP (a loopback listener); a full URL, such as a balancer's https one,
// is taken as it is.
func webBase(web string) string {
	if strings.Contains(web, "://") {
		return strings.TrimRight(web, "/")
	}
	return "http://" + web
}
