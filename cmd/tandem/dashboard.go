package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/instance"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/web"
)

// The operator's files in the data dir: the dashboard token, and the base
// URL of the tandem that last started on it.
const (
	dashboardTokenFile = "dashboard.token"
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

// liveInfo is what a serving tandem says of itself in its instance file
// (0600, under the data dir), for tandem dashboard-url.
type liveInfo struct {
	PID     int       `json:"pid"`
	Mode    string    `json:"mode"` // stdio or http
	Web     string    `json:"web"`  // the pages' base URL
	MCP     string    `json:"mcp,omitempty"`
	Started time.Time `json:"started"`
	// SignIn is the dashboard link, operator token included: it is why the
	// file is the operator's alone and why it is never logged.
	SignIn string `json:"signIn"`
}

// announceDashboard records this process's addresses and sign-in link in
// its instance file, and tells the operator where the link is. The link
// holds the operator token, so it is printed only to a terminal (and only
// when stderr carries plain lines): a pipe is usually a log collector or
// an MCP client's log file. Otherwise the log names the file, and tandem
// dashboard-url prints the link from it.
func announceDashboard(stderr io.Writer, log *slog.Logger, plain bool, inst *instance.Instance, info liveInfo) {
	b, err := json.Marshal(info)
	if err == nil {
		err = inst.Describe(b)
	}
	if err != nil {
		log.Warn("note this tandem for tandem dashboard-url", "err", err)
	}
	if plain && isTerminal(stderr) {
		fmt.Fprintf(stderr, "tandem: dashboard %s\n", info.SignIn)
		return
	}
	log.Info("dashboard: the sign-in link holds the operator token, so it is not logged; run tandem dashboard-url to print it",
		"web", info.Web, "file", inst.File())
}

func dashboardURLCmd() *cobra.Command {
	var dataDir, webAddr, tokenFile string
	c := &cobra.Command{
		Use:   "dashboard-url",
		Short: "Print the operator dashboard's sign-in link of every tandem serving on a data dir",
		Long: "Print, for every live tandem process on the data dir, the link that signs a browser in to its " +
			"operator dashboard (each process serves its own), with its mode, start time and sessions. Processes " +
			"that have exited are skipped. The link holds the operator token: keep it to yourself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := dataDir
			if dir == "" {
				home, _ := os.UserHomeDir()
				dir = defaultDataDir(home)
			}
			var serving []liveInfo
			if webAddr == "" {
				var err error
				if serving, err = liveServing(dir); err != nil {
					return err
				}
				if len(serving) == 0 {
					return fmt.Errorf("no tandem is serving on the data dir %s (one that has exited leaves no link): start one with tandem serve, or pass --data-dir or --web", dir)
				}
			}
			tok, err := sharedOperatorToken(tokenFile)
			if tokenFile == "" {
				tok, err = operatorToken(dir)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if webAddr != "" {
				fmt.Fprintln(out, web.DashboardURL(webBase(webAddr), tok))
				return nil
			}
			for _, info := range serving {
				link := web.DashboardURL(info.Web, tok)
				fmt.Fprintf(out, "%s  %s, pid %d, started %s, %s\n", link, info.Mode, info.PID,
					info.Started.Local().Format("2006-01-02 15:04:05"), sessionsOf(cmd.Context(), info.Web, tok))
			}
			return nil
		},
	}
	c.Flags().StringVar(&dataDir, "data-dir", "", "tandem's data dir (default: $XDG_STATE_HOME/tandem or ~/.local/state/tandem)")
	c.Flags().StringVar(&webAddr, "web", "", "the dashboard's address (host:port, or a URL such as a balancer's https://…): print its link only")
	c.Flags().StringVar(&tokenFile, "token-file", "", "the operator token file the nodes of a cluster share (web.operatorTokenFile), instead of the data dir's")
	return c
}

// liveServing lists what the live tandems of the data dir said of
// themselves, skipping one still starting (it has said nothing yet).
func liveServing(dir string) ([]liveInfo, error) {
	live, err := instance.Live(dir)
	if err != nil {
		return nil, err
	}
	var out []liveInfo
	for _, d := range live {
		var info liveInfo
		if json.Unmarshal(d.Info, &info) == nil && info.Web != "" {
			out = append(out, info)
		}
	}
	return out, nil
}

// liveBases is the dashboard address of every live tandem of the data dir.
func liveBases(dir string) []string {
	live, _ := liveServing(dir)
	var out []string
	for _, l := range live {
		out = append(out, strings.TrimRight(l.Web, "/"))
	}
	return out
}

// sessionsOf asks a live dashboard how many sessions it lists, briefly:
// an answer it cannot give is said, not waited for.
func sessionsOf(ctx context.Context, base, tok string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/state", nil)
	if err != nil {
		return "sessions unknown"
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "not answering"
	}
	defer resp.Body.Close()
	var st struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&st) != nil {
		return "sessions unknown (" + resp.Status + ")"
	}
	if len(st.Sessions) == 1 {
		return "1 session"
	}
	return strconv.Itoa(len(st.Sessions)) + " sessions"
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
