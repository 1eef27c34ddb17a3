package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// Directory is what a node reads of the shared store to find where a
// session lives.
type Directory interface {
	ActiveSession(ctx context.Context, tenant, actor, owner, name string) (store.SessionRow, error)
	Session(ctx context.Context, id string) (store.SessionRow, error)
	CommandSession(ctx context.Context, commandID string) (string, error)
	Instance(ctx context.Context, id string) (store.Instance, error)
	FindReplay(ctx context.Context, keyHash []byte) (store.Replay, error)
}

// Observer is told of every forwarded request, for metrics.
type Observer interface {
	// Forwarded counts one request this node sent to kind's owner (mcp,
	// monitor or internal), and its outcome: ok, or unreachable.
	Forwarded(kind, outcome string, took time.Duration)
}

// Node is this process as a member of the cluster.
type Node struct {
	// ID is this process's instance id in the store.
	ID string
	// Dir finds sessions and nodes.
	Dir Directory
	// Signer signs what this node forwards and checks what it receives.
	Signer *Signer
	// Lease is how stale a node's heartbeat may be while it counts as
	// alive; past it, its sessions are being ended (node_lost).
	Lease time.Duration
	// Transport carries forwarded requests; nil means a default with
	// keep-alive connections to every node.
	Transport http.RoundTripper
	// Observer, if set, is told of every forward.
	Observer Observer
	Logger   *slog.Logger

	mu        sync.Mutex
	instances map[string]cachedInstance // what Dir said of a node, for a second
	inFlight  map[forwardKey][]dest     // the nodes this one's forwarded calls run on
	spread    spreadBudget              // cancellations sent on to other nodes, per caller
	bodies    byteBudget                // request bytes held at once
}

// dest is a node a request goes to: its instance id, which the request's
// signature names, and its base URL.
type dest struct{ id, base string }

// cachedInstance is a node as the directory described it at fetched.
type cachedInstance struct {
	in      store.Instance
	fetched time.Time
}

// instanceTTL is how long a node's URL and heartbeat are taken from the
// cache: a forwarded call should cost one lookup, and a second is nothing
// beside the lease.
const instanceTTL = time.Second

// instance returns what the directory says of a node, at most instanceTTL old.
func (n *Node) instance(ctx context.Context, id string) (store.Instance, error) {
	n.mu.Lock()
	c, ok := n.instances[id]
	n.mu.Unlock()
	if ok && time.Since(c.fetched) < instanceTTL {
		return c.in, nil
	}
	in, err := n.Dir.Instance(ctx, id)
	if err != nil {
		return store.Instance{}, err
	}
	n.mu.Lock()
	if n.instances == nil {
		n.instances = map[string]cachedInstance{}
	}
	n.instances[id] = cachedInstance{in, time.Now()}
	n.mu.Unlock()
	return in, nil
}

// ErrOwnerGone means the node holding a session is not alive: it stopped
// heartbeating, and its sessions are (or are about to be) ended.
var ErrOwnerGone = errors.New("cluster: the node holding the session is gone")

// owner returns the base URL of the live node with that instance id (the
// node holding a session), or "" when that node is this one.
func (n *Node) owner(ctx context.Context, instanceID string) (string, error) {
	if instanceID == n.ID {
		return "", nil
	}
	in, err := n.instance(ctx, instanceID)
	if err != nil {
		return "", err
	}
	if !in.EndedAt.IsZero() || time.Since(in.HeartbeatAt) >= n.Lease || in.URL == "" {
		return "", fmt.Errorf("%w (node %s)", ErrOwnerGone, in.ID)
	}
	return in.URL, nil
}

func (n *Node) log() *slog.Logger {
	if n.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return n.Logger
}

func (n *Node) transport() http.RoundTripper {
	if n.Transport != nil {
		return n.Transport
	}
	return defaultTransport
}

// defaultTransport keeps connections to the other nodes open: a forwarded
// call should cost one round trip on loopback or a LAN, not a handshake.
var defaultTransport http.RoundTripper = &http.Transport{
	Proxy:               nil,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
	ForceAttemptHTTP2:   false,
}

// forward sends r, whose body was read into body, to the node to and
// streams its answer back to w unchanged. failed is called instead when no
// answer came before anything was written; delivered says whether the
// request had reached the owner (written whole to its connection), which
// may then have acted on it before it stopped answering.
func (n *Node) forward(kind string, w http.ResponseWriter, r *http.Request, body []byte, to dest, failed func(err error, delivered bool)) {
	base := to.base
	target, err := url.Parse(base)
	if err != nil {
		failed(fmt.Errorf("the owner node's URL %q: %w", base, err), false)
		return
	}
	start := time.Now()
	outcome := "ok"
	defer func() {
		if o := n.Observer; o != nil {
			o.Forwarded(kind, outcome, time.Since(start))
		}
	}()
	var delivered atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			delivered.Store(true)
		}
	}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out = pr.Out.WithContext(httptrace.WithClientTrace(pr.Out.Context(), trace))
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the owner checks Origin against the name the browser used
			if body != nil {
				pr.Out.Body = io.NopCloser(bytes.NewReader(body))
				pr.Out.ContentLength = int64(len(body))
			}
			n.Signer.Sign(pr.Out, body, to.id)
		},
		Transport:     n.transport(),
		FlushInterval: -1, // progress notifications stream through as they come
		ErrorLog:      slog.NewLogLogger(n.log().Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			outcome = "unreachable"
			n.log().Warn("forward to the owner node failed", "kind", kind, "node", base, "err", err, "delivered", delivered.Load())
			failed(err, delivered.Load())
		},
	}
	rp.ServeHTTP(w, r)
}

// Internal wraps the handler of an endpoint only other nodes may call: a
// request without a valid signature for this node is refused with 403,
// before its body is read.
func (n *Node) Internal(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := n.Signer.VerifyHeaders(r); err != nil {
			n.log().Warn("refused an internal request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			http.Error(w, "cluster: this endpoint is for tandem nodes; the request's signature does not verify", http.StatusForbidden)
			return
		}
		n.serveSignedBody(w, r, h)
	})
}

// serveSignedBody reads the body of a request whose signature headers
// verified, within the node's budget, and serves it with h only if it is
// the body the signature covers.
func (n *Node) serveSignedBody(w http.ResponseWriter, r *http.Request, h http.Handler) {
	body, release, ok := n.readBody(w, r)
	if !ok {
		return
	}
	defer release()
	if !BodyMatches(r, body) {
		http.Error(w, "cluster: the request's body is not the one signed", http.StatusForbidden)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.ServeHTTP(w, r)
}

// Call sends a signed request to the live node with instance id node and
// returns its answer's body, for the internal endpoints (dashboard data,
// approval decisions).
func (n *Node) Call(ctx context.Context, method, node, path string, body []byte) ([]byte, error) {
	base, err := n.owner(ctx, node)
	switch {
	case err != nil:
		return nil, err
	case base == "":
		return nil, fmt.Errorf("cluster: node %s is this node", node)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	n.Signer.Sign(req, body, node)
	start := time.Now()
	resp, err := (&http.Client{Transport: n.transport(), Timeout: 10 * time.Second}).Do(req)
	if o := n.Observer; o != nil {
		outcome := "ok"
		if err != nil {
			outcome = "unreachable"
		}
		o.Forwarded("internal", outcome, time.Since(start))
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return out, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(out))}
	}
	return out, nil
}

// StatusError is a node's answer other than 2xx to an internal call.
type StatusError struct {
	Code int
	Body string
}

// Error names the status and the node's message.
func (e *StatusError) Error() string { return fmt.Sprintf("node answered %d: %s", e.Code, e.Body) }

// HolderOf returns the instance id of the node holding the active session
// with that id, for [Node.Call], or "" when this node holds it.
func (n *Node) HolderOf(ctx context.Context, sessionID string) (string, error) {
	row, err := n.Dir.Session(ctx, sessionID)
	if err != nil {
		return "", err
	}
	if row.Status != store.StatusActive {
		return "", fmt.Errorf("session %s has ended", sessionID)
	}
	if row.InstanceID == n.ID {
		return "", nil
	}
	return row.InstanceID, nil
}

// Monitor wraps the browser pages of a session (/s/{key}, its WebSocket
// and its recording): a key this node does not hold is looked up in the
// store and the request goes to the node that held the session, live or
// ended (its replay), while that node runs. local says whether
// this node holds the key.
func (n *Node) Monitor(next http.Handler, local func(key string) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := monitorKey(r.URL.Path)
		if !ok || local(key) || Signed(r) {
			next.ServeHTTP(w, r)
			return
		}
		h := sha256.Sum256([]byte(key))
		rep, err := n.Dir.FindReplay(r.Context(), h[:])
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		// A live session's page, or an ended one's replay: both are on the
		// node that held the shell (its recording is on that node's disk).
		row, err := n.Dir.Session(r.Context(), rep.SessionID)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		base, err := n.owner(r.Context(), row.InstanceID)
		if err != nil || base == "" {
			next.ServeHTTP(w, r)
			return
		}
		n.forward("monitor", w, r, nil, dest{row.InstanceID, base}, func(error, bool) {
			http.Error(w, "The node that holds this session does not answer; if it is gone, the session ends shortly (node_lost).", http.StatusBadGateway)
		})
	})
}

// monitorKey returns the capability key of a session page path.
func monitorKey(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/s/")
	if !ok {
		return "", false
	}
	key, _, _ := strings.Cut(rest, "/")
	return key, key != ""
}

// maxInFlight bounds the request bytes a node holds at once across every
// request it routes or serves for other nodes: four full bodies.
const maxInFlight = 4 * maxBody

// byteBudget counts the request bytes held at once.
type byteBudget struct {
	mu   sync.Mutex
	used int64
}

// take reserves k bytes if the budget has them.
func (b *byteBudget) take(k int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+k > maxInFlight {
		return false
	}
	b.used += k
	return true
}

// give returns k bytes.
func (b *byteBudget) give(k int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= k
}

// readChunk is how much of a body is reserved and read at a time.
const readChunk = 64 << 10

// readBody reads an authenticated request's body, at most maxBody and
// within the node's in-flight budget, answering 413 or 503 itself when it
// cannot (ok=false). release gives the bytes back once the body is done with.
func (n *Node) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	if r.ContentLength > maxBody {
		http.Error(w, "request body larger than 16 MiB", http.StatusRequestEntityTooLarge)
		return nil, nil, false
	}
	var held int64
	release = func() { n.bodies.give(held) }
	var buf bytes.Buffer
	for {
		if int64(buf.Len()) >= held {
			if !n.bodies.take(readChunk) {
				release()
				n.log().Warn("refused a request: the node holds too many request bodies at once", "path", r.URL.Path, "remote", r.RemoteAddr)
				http.Error(w, "this node is busy reading other requests; retry shortly", http.StatusServiceUnavailable)
				return nil, nil, false
			}
			held += readChunk
		}
		_, err := io.CopyN(&buf, r.Body, held-int64(buf.Len()))
		if buf.Len() > maxBody {
			release()
			http.Error(w, "request body larger than 16 MiB", http.StatusRequestEntityTooLarge)
			return nil, nil, false
		}
		switch {
		case errors.Is(err, io.EOF):
			return buf.Bytes(), release, true
		case err != nil:
			release()
			http.Error(w, "request body unreadable", http.StatusBadRequest)
			return nil, nil, false
		}
	}
}
