package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/instance"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/web"
)

// DashboardTokenFile is the data dir's operator token file (see
// OperatorToken); tandem attach reads it without making one.
const DashboardTokenFile = "dashboard.token"

// OperatorToken reads the data dir's dashboard token, creating it (0600)
// on first use. Like a Jupyter token it is kept in the clear, so that
// `tandem dashboard-url` can print the link again; the file is the
// operator's alone.
func OperatorToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, DashboardTokenFile)
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
		return OperatorToken(dataDir) // another tandem made it first
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

// SharedOperatorToken reads web.operatorTokenFile: a token the nodes of a
// cluster share, which must exist, be the operator's alone (0600) and be
// at least 32 letters, digits, '-' or '_'.
func SharedOperatorToken(path string) (string, error) {
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
		return SharedOperatorToken(cfg.Web.OperatorTokenFile)
	}
	return OperatorToken(dataDir)
}

// LiveInfo is what a serving tandem says of itself in its instance file
// (0600, under the data dir), for tandem dashboard-url.
type LiveInfo struct {
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
// holds the operator token, so it is printed only when Options.SignInLink
// says stderr is a terminal (and only beside plain logs): a pipe is
// usually a log collector or an MCP client's log file. Otherwise the log names the file, and tandem
// dashboard-url prints the link from it.
func announceDashboard(o *Options, log *slog.Logger, inst *instance.Instance, info LiveInfo) {
	b, err := json.Marshal(info)
	if err == nil {
		err = inst.Describe(b)
	}
	if err != nil {
		log.Warn("note this tandem for tandem dashboard-url", "err", err)
	}
	if o.Plain != nil && o.SignInLink {
		fmt.Fprintf(o.Plain, "tandem: dashboard %s\n", info.SignIn)
		return
	}
	log.Info("dashboard: the sign-in link holds the operator token, so it is not logged; run tandem dashboard-url to print it",
		"web", info.Web, "file", inst.File())
}

// LiveServing lists what the live tandems of the data dir said of
// themselves, skipping one still starting (it has said nothing yet).
func LiveServing(dir string) ([]LiveInfo, error) {
	live, err := instance.Live(dir)
	if err != nil {
		return nil, err
	}
	var out []LiveInfo
	for _, d := range live {
		var info LiveInfo
		if json.Unmarshal(d.Info, &info) == nil && info.Web != "" {
			out = append(out, info)
		}
	}
	return out, nil
}

// dashSessions shows the session manager to the dashboard; a stdio
// session's actor is named by its client (see mcp.Server.StdioClient).
// With a store it also lists the ended sessions with a recording that
// earlier processes on the data dir (or other cluster nodes) ran, and
// serves their replays to the operator by session id (web.ReplayShelf).
type dashSessions struct {
	m     *session.Manager
	names func(id string) string
	// st and recordings (the data dir's recordings directory) find the
	// recordings of ended sessions; st nil lists this process's only.
	st         store.Store
	recordings string
}

// recordedShown is how many ended sessions of the store the dashboard
// lists at most, newest first.
const recordedShown = 100

func (d dashSessions) Sessions(ctx context.Context) ([]web.SessionRow, error) {
	all := d.m.Overview()
	rows := make([]web.SessionRow, 0, len(all))
	seen := make(map[string]bool, len(all))
	for _, o := range all {
		if o.Actor == "" && d.names != nil {
			o.Actor = d.names(o.Owner)
		}
		seen[o.ID] = true
		rows = append(rows, web.SessionRow{ID: o.ID, Name: o.Name, Tenant: o.Tenant, Actor: o.Actor, Target: o.Target,
			Kind: o.Kind, Status: o.Status, LastCommand: o.LastCommand, CreatedAt: o.CreatedAt,
			LastActivity: o.LastActivity, EndedAt: o.EndedAt, Ended: o.Ended, HumanRequest: o.HumanRequest,
			Connections: o.Connections, EndReason: o.EndReason})
	}
	if d.st == nil {
		return rows, nil
	}
	recorded, err := d.st.RecordedSessions(ctx, recordedShown)
	if err != nil {
		return rows, fmt.Errorf("list the recorded sessions: %w", err)
	}
	for _, rs := range recorded {
		r := rs.Session
		if seen[r.ID] || !d.readable(rs.RecordingPath) {
			continue // this process's, listed above; or another node's file
		}
		actor := r.Actor
		if actor == "" && d.names != nil {
			actor = d.names(r.Owner)
		}
		rows = append(rows, web.SessionRow{ID: r.ID, Name: r.Name, Tenant: r.Tenant, Actor: actor, Target: r.Target,
			Kind: r.Kind, Status: "ended", CreatedAt: r.CreatedAt, EndedAt: r.EndedAt, Ended: true, EndReason: r.EndReason})
	}
	return rows, nil
}

// readable reports whether path is one of this data dir's recordings and
// is here to serve. The path comes from the database, which is a file like
// any other: a rewritten row must not make the replay serve another file.
// A cluster node reads only the recordings it wrote itself.
func (d dashSessions) readable(path string) bool {
	if d.recordings == "" || filepath.Dir(path) != filepath.Clean(d.recordings) || !recordingFile.MatchString(filepath.Base(path)) {
		return false
	}
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode().IsRegular()
}

// recordingFile is how the session layer names a recording: the session
// id, hex.
var recordingFile = regexp.MustCompile(`^[0-9a-f]{16}\.cast$`)

// Replay implements web.ReplayShelf: the recording of an ended session by
// its id, from the store, if this tandem can read it.
func (d dashSessions) Replay(ctx context.Context, id string) (name, path string, ok bool) {
	if d.st == nil {
		return "", "", false
	}
	r, err := d.st.ReplayOf(ctx, id)
	if err != nil || r.Status != store.StatusEnded || !d.readable(r.RecordingPath) {
		return "", "", false
	}
	return r.Name, r.RecordingPath, true
}

func (d dashSessions) MonitorKey(_ context.Context, id string) (string, bool) {
	return d.m.MonitorKeyOf(id)
}

func (d dashSessions) Changes(fn func()) func() { return d.m.Changes(fn) }

// dashAudit searches the audit log for the dashboard; a stdio
// connection's actor ("conn-…") is named by its client.
type dashAudit struct {
	st    store.Store
	names func(id string) string
}

func (d dashAudit) Search(ctx context.Context, q web.AuditQuery) ([]web.AuditEntry, error) {
	limit := min(max(q.Limit, 1), 500)
	n := limit
	if q.Tool != "" || q.Outcome != "" {
		n = 5000 // filtered here, after the store's own filter
	}
	recs, err := d.st.TailAudit(ctx, n, store.AuditFilter{SessionName: q.Session, Tenant: q.Tenant, Before: q.Before})
	if err != nil {
		return nil, err
	}
	var out []web.AuditEntry
	for i := len(recs) - 1; i >= 0 && len(out) < limit; i-- {
		r := recs[i]
		if (q.Tool != "" && r.Tool != q.Tool) || (q.Outcome != "" && r.Outcome != q.Outcome) {
			continue
		}
		actor := r.Actor
		if strings.HasPrefix(actor, "conn-") && d.names != nil {
			actor = d.names(actor)
		} else if client, _, ok := mcp.AuditClient(actor); ok {
			actor = "stdio client (" + client + ")"
		}
		out = append(out, web.AuditEntry{Seq: r.Seq, Time: r.Time, Tenant: r.Tenant, Actor: actor, SessionName: r.SessionName,
			Tool: r.Tool, Event: r.Event, Outcome: r.Outcome, Reason: r.Reason, ApprovalID: r.ApprovalID, Command: argsSummary(r.Args)})
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

// argsSummary is what the dashboard's audit table shows of a call's
// arguments: its command line, else the arguments as audited (secrets
// are redacted before a record is written), cut to summaryMax bytes.
func argsSummary(args json.RawMessage) string {
	var m map[string]any
	if len(args) == 0 || json.Unmarshal(args, &m) != nil {
		return ""
	}
	s, ok := m["command"].(string)
	if !ok {
		delete(m, "sessionToken") // never audited; kept out here too
		b, _ := json.Marshal(m)
		if s = string(b); s == "{}" {
			return ""
		}
	}
	if len(s) > summaryMax {
		s = strings.ToValidUTF8(s[:summaryMax], "") + "…"
	}
	return s
}

// summaryMax bounds argsSummary.
const summaryMax = 300
