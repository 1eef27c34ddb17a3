package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// maxBody bounds a request body a node reads to route it: MCP's own bound
// on one message over stdio.
const maxBody = 16 << 20

// Caller is who a bearer token names, as far as routing needs: sessions
// belong to a tenant and an owner (the claim's sid, as "sid:…"); Actor
// completes the caller as the node's session registry keys it.
type Caller struct {
	Tenant, Actor, Owner string
}

// MCPOptions are what the /mcp router needs of the node's MCP server.
type MCPOptions struct {
	// Identify checks the request's bearer token as the MCP endpoint would;
	// ok=false leaves the request to the endpoint, which refuses it.
	Identify func(ctx context.Context, r *http.Request) (Caller, bool)
	// Local says whether this node holds the caller's session of that name.
	Local func(c Caller, name string) bool
	// NodesOf lists the instances that hold an active session of the
	// caller's, this one included or not: where a call of theirs can run.
	NodesOf func(ctx context.Context, c Caller) []string
	// Unreachable renders a tool call that could not be forwarded, for the
	// request id given, as the JSON-RPC response body to send. delivered
	// says the owner received the call before it stopped answering, so it
	// may have acted on it: the reply must not say that nothing ran.
	Unreachable func(id json.RawMessage, tool, session string, err error, delivered bool) []byte
}

// sessionTools are the tools that name a session and so run where it lives.
var sessionTools = map[string]bool{
	"ssh_exec": true, "ssh_cancel": true, "ssh_read_output": true, "ssh_disconnect": true, "ssh_send_input": true,
	"ssh_get_monitoring_url": true, "ssh_request_human": true, "ssh_forward_port": true, "ssh_list_ports": true,
	"ssh_upload": true, "ssh_download": true,
}

// outputURIPrefix is the resource URI of a command's output (see
// internal/mcp): tandem://output/{commandId}/{stream}.
const outputURIPrefix = "tandem://output/"

// fileURIPrefix is the resource URI of a downloaded file (see
// internal/mcp): tandem://file/{sessionId}/{downloadId}.
const fileURIPrefix = "tandem://file/"

// rpc is as much of a JSON-RPC message as routing reads.
type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		URI       string `json:"uri"`
		Arguments struct {
			SessionName string `json:"sessionName"`
		} `json:"arguments"`
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
	} `json:"params"`
}

// forwardKey names a tool call this node has forwarded and not yet seen
// answered: its caller and its JSON-RPC id, as the client wrote it.
type forwardKey struct {
	caller Caller
	id     string
}

// forwarding records that the call k is in flight at the node at base,
// until the returned func is called.
func (n *Node) forwarding(k forwardKey, to dest) (done func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inFlight == nil {
		n.inFlight = map[forwardKey][]dest{}
	}
	n.inFlight[k] = append(n.inFlight[k], to)
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		bases := n.inFlight[k]
		if i := slices.Index(bases, to); i >= 0 {
			bases = slices.Delete(bases, i, i+1)
		}
		if len(bases) == 0 {
			delete(n.inFlight, k)
			return
		}
		n.inFlight[k] = bases
	}
}

// forwardedTo returns the node a call in flight was forwarded to, if any.
func (n *Node) forwardedTo(k forwardKey) (dest, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if bases := n.inFlight[k]; len(bases) > 0 {
		return bases[0], true
	}
	return dest{}, false
}

// cancelTarget returns the node a client's notifications/cancelled must go
// to: the one this node forwarded the named call to, which runs it. The
// notification is a request of its own, which would otherwise be served
// here, where the call is not.
func (n *Node) cancelTarget(c Caller, msg rpc) (dest, bool) {
	if msg.Method != "notifications/cancelled" || len(msg.Params.RequestID) == 0 {
		return dest{}, false
	}
	return n.forwardedTo(forwardKey{c, string(bytes.TrimSpace(msg.Params.RequestID))})
}

// MCP wraps the /mcp endpoint: a tool call or resource read for a session
// another node holds is forwarded there, and the owner's reply (with any
// progress it streams) comes back unchanged. Requests signed by another
// node are served here and never forwarded again; a bad signature is
// refused. Nothing of a body is read before its request is authenticated,
// by the caller's bearer token or a node's signature; an unauthenticated
// request goes to the endpoint, which refuses it unread.
func (n *Node) MCP(next http.Handler, o MCPOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if Signed(r) {
			if _, err := n.Signer.VerifyHeaders(r); err != nil {
				n.log().Warn("refused a forwarded call", "remote", r.RemoteAddr, "err", err)
				http.Error(w, "cluster: the forwarded request's signature does not verify", http.StatusForbidden)
				return
			}
			n.serveSignedBody(w, r, next)
			return
		}
		caller, ok := o.Identify(r.Context(), r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		body, release, ok := n.readBody(w, r)
		if !ok {
			return
		}
		defer release()
		r.Body = io.NopCloser(bytes.NewReader(body))
		to, msg, gone := n.route(r, body, caller, o)
		unreachable := func(err error, delivered bool) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(o.Unreachable(msg.ID, msg.Params.Name, msg.Params.Arguments.SessionName, err, delivered))
		}
		switch {
		case gone != nil:
			unreachable(gone, false)
		case to.base == "":
			if to, ok := n.cancelTarget(caller, msg); ok {
				n.forward("mcp", w, r, body, to, func(err error, _ bool) {
					// The call's node is gone, and the call with it.
					w.WriteHeader(http.StatusAccepted)
				})
				return
			}
			if msg.Method == "notifications/cancelled" {
				n.spreadCancel(r, body, caller, o)
			}
			next.ServeHTTP(w, r)
		default:
			if msg.Method == "tools/call" {
				defer n.forwarding(forwardKey{caller, string(bytes.TrimSpace(msg.ID))}, to)()
			}
			n.forward("mcp", w, r, body, to, unreachable)
		}
	})
}

// spreadCancelWait bounds a cancellation's copy to another node.
const spreadCancelWait = 5 * time.Second

// spreadCancel sends a copy of a client's notifications/cancelled, signed,
// to every other node that holds a session of the caller's, where the call
// it names may run: a balancer can bring the notification to any node,
// which neither runs the call nor forwarded it. Each node matches it
// against its own calls of that verified caller, after checking the
// caller's token itself; the copies go in the background, and a node that
// does not answer has no call to end.
func (n *Node) spreadCancel(r *http.Request, body []byte, c Caller, o MCPOptions) {
	if o.NodesOf == nil {
		return
	}
	if !n.spread.take(c, time.Now()) {
		n.log().Warn("not sending a cancellation on to other nodes: the caller sent too many this second",
			"tenant", c.Tenant, "actor", c.Actor)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), spreadCancelWait)
	var wg sync.WaitGroup
	for _, id := range o.NodesOf(ctx, c) {
		base, err := n.owner(ctx, id)
		if err != nil || base == "" {
			continue // this node, or one that is gone
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			continue
		}
		req.Header = r.Header.Clone()
		req.Host = r.Host // the owner checks the Host it was reached by, as for a forwarded call
		n.Signer.Sign(req, body, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := (&http.Client{Transport: n.transport()}).Do(req)
			if err != nil {
				n.log().Debug("send a cancellation on to a node", "node", base, "err", err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}()
	}
	go func() { wg.Wait(); cancel() }()
}

// spreadPerSecond bounds the cancellations of one caller that a node sends
// on each second: each costs a scan of the session directory and a request
// to every node holding the caller's sessions, and costs its sender nothing.
// An agent cancels a call or two at a time.
const spreadPerSecond = 10

// spreadBudget counts each caller's cancellations sent on in the current
// one-second window; the counts go with the window, so it holds no more
// callers than one second brings.
type spreadBudget struct {
	mu     sync.Mutex
	window time.Time
	counts map[Caller]int
}

// take spends one of c's sends for the second now falls in, if any is left.
func (b *spreadBudget) take(c Caller, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.counts == nil || now.Sub(b.window) >= time.Second || now.Before(b.window) {
		b.window, b.counts = now, map[Caller]int{}
	}
	if b.counts[c] >= spreadPerSecond {
		return false
	}
	b.counts[c]++
	return true
}

// route returns the node a request of caller c must go to, with base ""
// to serve it here: anything but a tool call or resource read naming
// another live node's session of this caller. gone is set when that node
// has stopped heartbeating and its sessions are about to end.
func (n *Node) route(r *http.Request, body []byte, c Caller, o MCPOptions) (to dest, msg rpc, gone error) {
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &msg) != nil || len(msg.ID) == 0 {
		return dest{}, msg, nil
	}
	var row store.SessionRow
	switch {
	case msg.Method == "tools/call" && sessionTools[msg.Params.Name] && msg.Params.Arguments.SessionName != "":
		name := msg.Params.Arguments.SessionName
		if o.Local(c, name) {
			return dest{}, msg, nil
		}
		var err error
		if row, err = n.Dir.ActiveSession(r.Context(), c.Tenant, c.Actor, c.Owner, name); err != nil {
			return dest{}, msg, nil
		}
	case msg.Method == "resources/read" && strings.HasPrefix(msg.Params.URI, outputURIPrefix):
		cmd, _, _ := strings.Cut(strings.TrimPrefix(msg.Params.URI, outputURIPrefix), "/")
		sid, err := n.Dir.CommandSession(r.Context(), cmd)
		if err != nil {
			return dest{}, msg, nil
		}
		if row, err = n.Dir.Session(r.Context(), sid); err != nil || row.Tenant != c.Tenant || row.Actor != c.Actor || row.Owner != c.Owner {
			return dest{}, msg, nil // not the caller's: answered here, as unknown
		}
	case msg.Method == "resources/read" && strings.HasPrefix(msg.Params.URI, fileURIPrefix):
		sid, _, _ := strings.Cut(strings.TrimPrefix(msg.Params.URI, fileURIPrefix), "/")
		var err error
		if row, err = n.Dir.Session(r.Context(), sid); err != nil || row.Tenant != c.Tenant || row.Actor != c.Actor || row.Owner != c.Owner {
			return dest{}, msg, nil // not the caller's: answered here, as unknown
		}
	default:
		return dest{}, msg, nil
	}
	base, err := n.owner(r.Context(), row.InstanceID)
	switch {
	case errors.Is(err, ErrOwnerGone):
		return dest{}, msg, err
	case err != nil:
		n.log().Warn("find the node holding a session", "session", row.Name, "err", err)
		return dest{}, msg, nil
	}
	return dest{row.InstanceID, base}, msg, nil
}
