package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/cluster"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/postgres"
	"github.com/tandem-sh/tandem/internal/web"
)

// advertiseURL is the URL this node registers for the other nodes: the
// flag, else cluster.url, else the listener's own address. It is "" when
// the node takes no part in a cluster.
func advertiseURL(o *Options, cfg *config.Config, base string, shared bool, hm *httpMode, log *slog.Logger) (string, error) {
	switch {
	case !cfg.Cluster.On():
		if shared && hm.on() {
			log.Warn("no cluster secret (cluster.secretFile): this node serves only the sessions it holds; a call for another node's session is refused. Set cluster.secretFile on every node to route calls between them.")
		}
		if o.Advertise != "" {
			return "", errors.New("--advertise-url needs a cluster: set cluster.secretFile in tandem.yaml")
		}
		return "", nil
	case !shared:
		return "", errors.New("config: cluster joins nodes that share a PostgreSQL store: pass --store postgres://…, or remove cluster")
	case !hm.on():
		return "", errors.New("config: cluster routes HTTP calls between nodes: serve with --http, or remove cluster")
	}
	u := o.Advertise
	if u == "" {
		u = cfg.Cluster.URL
	}
	if u == "" {
		p, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		if ip := net.ParseIP(p.Hostname()); ip != nil && ip.IsUnspecified() {
			return "", fmt.Errorf("--http %s listens on every address, so other nodes cannot tell which reaches this one: pass --advertise-url https://THIS-HOST:PORT (or set cluster.url)", p.Host)
		}
		u = base
	}
	return strings.TrimRight(u, "/"), nil
}

// clusterSecret reads cluster.secret or cluster.secretFile. The file must
// be the operator's alone, as the claim key is.
func clusterSecret(c config.Cluster) ([]byte, error) {
	if c.Secret != "" {
		return []byte(c.Secret), nil
	}
	s, err := readPrivateFile(c.SecretFile, "cluster.secretFile")
	return []byte(s), err
}

// readPrivateFile reads a secret from a file that only its owner may read
// (mode 0600 or stricter), trimmed of surrounding space; key names the
// setting in messages.
func readPrivateFile(path, key string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s %s is readable by group or others (mode %v): chmod 600 it", key, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// clusterTransport carries forwarded requests: TLS checked against
// cluster.caFile when set, else the system's roots.
func clusterTransport(c config.Cluster) (http.RoundTripper, error) {
	t := &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster.caFile %s holds no PEM certificate", c.CAFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t, nil
}

// peers is this node's view of the cluster for the dashboard: the other
// nodes' sessions and approvals, from the shared store, refreshed when a
// notification says they changed.
type peers struct {
	node   *cluster.Node
	st     store.Store
	log    *slog.Logger
	broker *approval.Broker

	mu        sync.Mutex
	sessions  []store.SessionRow  // other nodes' active sessions
	approvals []approval.Approval // other nodes' pending approvals
	nodeOf    map[string]string   // approval id -> the instance that asked
	watchers  map[int]func()
	nextWatch int
}

func newPeers(node *cluster.Node, st store.Store, broker *approval.Broker, log *slog.Logger) *peers {
	return &peers{node: node, st: st, broker: broker, log: log, watchers: map[int]func(){}}
}

// refresh re-reads the other nodes' sessions and approvals.
func (p *peers) refresh(ctx context.Context) {
	rows, err := p.st.ActiveSessions(ctx)
	if err != nil {
		p.log.Warn("read the other nodes' sessions", "err", err)
		return
	}
	pend, err := p.st.PendingApprovals(ctx)
	if err != nil {
		p.log.Warn("read the other nodes' approvals", "err", err)
		return
	}
	var others []store.SessionRow
	for _, r := range rows {
		if r.InstanceID != p.node.ID {
			others = append(others, r)
		}
	}
	var apps []approval.Approval
	nodeOf := map[string]string{}
	for _, r := range pend {
		if r.InstanceID == p.node.ID || time.Now().After(r.ExpiresAt) {
			continue
		}
		nodeOf[r.ID] = r.InstanceID
		apps = append(apps, approval.Approval{Status: approval.Pending, Request: approval.Request{
			ID: r.ID, Fingerprint: r.Fingerprint, Rule: r.Rule, Created: r.CreatedAt, Expires: r.ExpiresAt,
			Action: approval.Action{Tenant: r.Tenant, Actor: r.Actor, SessionID: r.SessionID, SessionName: r.SessionName,
				Target: r.Target, Tool: r.Tool, Command: r.Command, Cwd: r.Cwd}}})
	}
	p.mu.Lock()
	p.sessions, p.approvals, p.nodeOf = others, apps, nodeOf
	ws := make([]func(), 0, len(p.watchers))
	for _, w := range p.watchers {
		ws = append(ws, w)
	}
	p.mu.Unlock()
	for _, w := range ws {
		w()
	}
}

// watch calls fn (a signal, must not block) after every refresh.
func (p *peers) watch(fn func()) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.nextWatch
	p.nextWatch++
	p.watchers[id] = fn
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.watchers, id)
	}
}

// listen refreshes the view, and the revocation list, whenever PostgreSQL
// says something changed, until ctx ends; and every few seconds besides,
// for a node that missed a notification.
func (p *peers) listen(ctx context.Context, db *postgres.DB, revoked func(context.Context)) {
	kick := make(chan struct{}, 1)
	go db.Listen(ctx, time.Second, func(channel, _ string) {
		if channel == postgres.ChannelRevoked && revoked != nil {
			revoked(ctx)
			return
		}
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		p.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
	}
}

// clusterDesk is the dashboard's approvals across the cluster: this node's
// broker, plus the other nodes' pending approvals. A decision on another
// node's approval goes to that node, whose broker alone settles it, so the
// first answer wins exactly as on one node.
type clusterDesk struct {
	*approval.Broker
	p *peers
}

// Pending lists every node's pending approvals, oldest first.
func (d clusterDesk) Pending() []approval.Approval {
	out := d.Broker.Pending()
	d.p.mu.Lock()
	out = append(out, d.p.approvals...)
	d.p.mu.Unlock()
	return out
}

// Decide answers an approval of any node.
func (d clusterDesk) Decide(ctx context.Context, id string, dec approval.Decision) (approval.Approval, error) {
	a, err := d.Broker.Decide(ctx, id, dec)
	if !errors.Is(err, approval.ErrNotFound) {
		return a, err
	}
	d.p.mu.Lock()
	inst, ok := d.p.nodeOf[id]
	d.p.mu.Unlock()
	if !ok {
		return a, err
	}
	body, _ := json.Marshal(dec)
	out, cerr := d.p.node.Call(ctx, http.MethodPost, inst, "/internal/v1/approvals/"+url.PathEscape(id)+"/decision", body)
	var se *cluster.StatusError
	switch {
	case errors.Is(cerr, cluster.ErrOwnerGone) || errors.Is(cerr, store.ErrNotFound):
		return approval.Approval{}, approval.ErrNotFound
	case errors.As(cerr, &se) && se.Code == http.StatusNotFound:
		return approval.Approval{}, approval.ErrNotFound
	case errors.As(cerr, &se) && se.Code == http.StatusConflict:
		_ = json.Unmarshal([]byte(se.Body), &a)
		return a, approval.ErrDecided
	case cerr != nil:
		return approval.Approval{}, fmt.Errorf("the node holding approval %s: %w", id, cerr)
	}
	if err := json.Unmarshal(out, &a); err != nil {
		return approval.Approval{}, err
	}
	go d.p.refresh(context.WithoutCancel(ctx))
	return a, nil
}

// Watch signals changes of this node's approvals and of the others'.
func (d clusterDesk) Watch(fn func()) func() {
	a, b := d.Broker.Watch(fn), d.p.watch(fn)
	return func() { a(); b() }
}

// clusterSessions is the dashboard's sessions across the cluster.
type clusterSessions struct {
	dashSessions
	p *peers
}

// Sessions lists this node's sessions and the other nodes' live ones.
func (d clusterSessions) Sessions(ctx context.Context) ([]web.SessionRow, error) {
	rows, err := d.dashSessions.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	for _, r := range d.p.sessions {
		rows = append(rows, web.SessionRow{ID: r.ID, Name: r.Name, Tenant: r.Tenant, Actor: r.Actor,
			Target: r.Target, Kind: r.Kind, Status: "on another node", CreatedAt: r.CreatedAt})
	}
	return rows, nil
}

// MonitorKey asks the node holding a session for its capability key.
func (d clusterSessions) MonitorKey(ctx context.Context, id string) (string, bool) {
	if k, ok := d.dashSessions.MonitorKey(ctx, id); ok {
		return k, true
	}
	holder, err := d.p.node.HolderOf(ctx, id)
	if err != nil || holder == "" {
		return "", false
	}
	out, err := d.p.node.Call(ctx, http.MethodGet, holder, "/internal/v1/sessions/"+url.PathEscape(id)+"/monitor-key", nil)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}

// Changes signals this node's session changes and the others'.
func (d clusterSessions) Changes(fn func()) func() {
	a, b := d.dashSessions.Changes(fn), d.p.watch(fn)
	return func() { a(); b() }
}

// internalRoutes are the endpoints only other nodes may call.
func internalRoutes(node *cluster.Node, sessions *session.Manager, broker *approval.Broker) map[string]http.Handler {
	return map[string]http.Handler{
		"GET /internal/v1/sessions/{id}/monitor-key": node.Internal(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, ok := sessions.MonitorKeyOf(r.PathValue("id"))
			if !ok {
				http.Error(w, "no such session on this node", http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(k))
		})),
		"POST /internal/v1/approvals/{id}/decision": node.Internal(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var d approval.Decision
			if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
				http.Error(w, "decision: "+err.Error(), http.StatusBadRequest)
				return
			}
			a, err := broker.Decide(r.Context(), r.PathValue("id"), d)
			w.Header().Set("Content-Type", "application/json")
			switch {
			case errors.Is(err, approval.ErrNotFound):
				http.Error(w, "no such approval on this node", http.StatusNotFound)
				return
			case errors.Is(err, approval.ErrDecided):
				w.WriteHeader(http.StatusConflict)
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			_ = json.NewEncoder(w).Encode(a)
		})),
	}
}

// mcpRouting is how the /mcp router identifies callers and what it knows
// of this node's sessions.
func mcpRouting(hm *httpMode, sessions *session.Manager, rec *durable) cluster.MCPOptions {
	return cluster.MCPOptions{
		Identify: func(ctx context.Context, r *http.Request) (cluster.Caller, bool) {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				return cluster.Caller{}, false
			}
			c, err := hm.verifier.Verify(ctx, strings.TrimSpace(tok))
			if err != nil {
				return cluster.Caller{}, false
			}
			return cluster.Caller{Tenant: c.Tenant, Actor: c.Actor, Owner: "sid:" + c.SID}, true
		},
		Local: func(c cluster.Caller, name string) bool {
			return sessions.Has(session.Caller{Tenant: c.Tenant, Actor: c.Actor, ID: c.Owner}, name)
		},
		NodesOf: func(ctx context.Context, c cluster.Caller) []string {
			rows, err := rec.st.ActiveSessionsOf(ctx, c.Tenant, c.Actor, c.Owner)
			if err != nil {
				return nil
			}
			var ids []string
			for _, r := range rows {
				if !slices.Contains(ids, r.InstanceID) {
					ids = append(ids, r.InstanceID)
				}
			}
			return ids
		},
		Unreachable: mcp.UnreachableReply,
	}
}

// newNode makes this process a member of the cluster.
func newNode(cfg *config.Config, rec *durable, met cluster.Observer, log *slog.Logger) (*cluster.Node, error) {
	secret, err := clusterSecret(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	signer, err := cluster.NewSigner(secret, rec.inst.ID)
	if err != nil {
		return nil, fmt.Errorf("cluster.secretFile: %w", err)
	}
	tr, err := clusterTransport(cfg.Cluster)
	if err != nil {
		return nil, err
	}
	return &cluster.Node{ID: rec.inst.ID, Dir: rec.st, Signer: signer, Lease: SharedLease, Transport: tr,
		Observer: met, Logger: log}, nil
}

// elsewhere lists a caller's sessions that the other nodes hold, for
// ssh_list_sessions on a cluster node; nil when the node runs alone.
func elsewhere(nodeURL string, rec *durable, log *slog.Logger) func(context.Context, session.Caller) []session.Info {
	if nodeURL == "" {
		return nil
	}
	return func(ctx context.Context, c session.Caller) []session.Info {
		rows, err := rec.st.ActiveSessionsOf(ctx, c.Tenant, c.Actor, c.ID)
		if err != nil {
			log.Warn("list the other nodes' sessions", "err", err)
			return nil
		}
		var out []session.Info
		for _, r := range rows {
			if r.InstanceID == rec.inst.ID {
				continue
			}
			out = append(out, session.Info{Name: r.Name, Target: r.Target, Kind: r.Kind, Host: r.Host, Port: r.Port,
				Username: r.Username, Status: session.StatusActive, CreatedAt: r.CreatedAt})
		}
		return out
	}
}

// commandRecorded is, on a node of a cluster, the wait for a command's row
// in the shared store that a reply naming its output makes: the other nodes
// route a read of the output by that row.
func commandRecorded(nodeURL string, rec *durable) func(context.Context, string) error {
	if nodeURL == "" {
		return nil
	}
	return rec.journal.Recorded
}
