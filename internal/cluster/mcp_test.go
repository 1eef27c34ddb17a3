package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/store"
)

// dir is an in-memory Directory: session "dev" of tenant t, actor alice,
// owner sid:1, lives on node "a"; command c1 ran in it.
type dir struct{ heartbeat time.Time }

func (d dir) ActiveSession(_ context.Context, tenant, actor, owner, name string) (store.SessionRow, error) {
	if tenant == "t" && actor == "alice" && owner == "sid:1" && name == "dev" {
		return store.SessionRow{ID: "s1", Name: "dev", Tenant: "t", Actor: "alice", Owner: "sid:1", InstanceID: "a", Status: store.StatusActive}, nil
	}
	return store.SessionRow{}, store.ErrNotFound
}

func (d dir) Session(ctx context.Context, id string) (store.SessionRow, error) {
	if id == "s1" {
		return d.ActiveSession(ctx, "t", "alice", "sid:1", "dev")
	}
	return store.SessionRow{}, store.ErrNotFound
}

func (d dir) CommandSession(_ context.Context, id string) (string, error) {
	if id == "c1" {
		return "s1", nil
	}
	return "", store.ErrNotFound
}

func (d dir) Instance(_ context.Context, id string) (store.Instance, error) {
	if id == "a" {
		return store.Instance{ID: "a", URL: "http://node-a:1", HeartbeatAt: d.heartbeat}, nil
	}
	return store.Instance{}, store.ErrNotFound
}

func (d dir) FindReplay(context.Context, []byte) (store.Replay, error) {
	return store.Replay{}, store.ErrNotFound
}

func routeNode(heartbeat time.Time) (*Node, MCPOptions) {
	n := &Node{ID: "b", Dir: dir{heartbeat}, Lease: 15 * time.Second}
	o := MCPOptions{
		Identify: func(_ context.Context, r *http.Request) (Caller, bool) {
			switch r.Header.Get("Authorization") {
			case "Bearer one":
				return Caller{Tenant: "t", Actor: "alice", Owner: "sid:1"}, true
			case "Bearer two":
				return Caller{Tenant: "t", Actor: "mallory", Owner: "sid:2"}, true
			case "Bearer same-sid":
				return Caller{Tenant: "t", Actor: "bob", Owner: "sid:1"}, true
			}
			return Caller{}, false
		},
		Local: func(Caller, string) bool { return false },
	}
	return n, o
}

// routeAs routes r as MCP does: an unidentified caller's request is
// served here.
func routeAs(n *Node, o MCPOptions, r *http.Request, body []byte) (string, error) {
	c, ok := o.Identify(r.Context(), r)
	if !ok {
		return "", nil
	}
	to, _, gone := n.route(r, body, c, o)
	return to.base, gone
}

func TestRoute(t *testing.T) {
	call := func(tool, session string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"sessionName":"` + session + `","sessionToken":"x"}}}`
	}
	for _, tc := range []struct {
		name, auth, body string
		stale            bool
		want             string // "" here, a URL there, "gone"
	}{
		{"exec, other node", "one", call("ssh_exec", "dev"), false, "http://node-a:1"},
		{"cancel, other node", "one", call("ssh_cancel", "dev"), false, "http://node-a:1"},
		{"request the human, other node", "one", call("ssh_request_human", "dev"), false, "http://node-a:1"},
		{"send input, other node", "one", call("ssh_send_input", "dev"), false, "http://node-a:1"},
		{"read output", "one", call("ssh_read_output", "dev"), false, "http://node-a:1"},
		{"resource", "one", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://output/c1/stdout"}}`, false, "http://node-a:1"},
		{"resource of another caller", "two", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://output/c1/stdout"}}`, false, ""},
		{"another caller's name", "two", call("ssh_exec", "dev"), false, ""},
		{"another actor with the same sid", "same-sid", call("ssh_exec", "dev"), false, ""},
		{"resource of another actor with the same sid", "same-sid", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://output/c1/stdout"}}`, false, ""},
		{"upload, other node", "one", call("ssh_upload", "dev"), false, "http://node-a:1"},
		{"download, other node", "one", call("ssh_download", "dev"), false, "http://node-a:1"},
		{"downloaded file", "one", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://file/s1/ab12?page=1"}}`, false, "http://node-a:1"},
		{"another caller's downloaded file", "two", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://file/s1/ab12"}}`, false, ""},
		{"downloaded file of an unknown session", "one", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://file/s9/ab12"}}`, false, ""},
		{"no claim", "", call("ssh_exec", "dev"), false, ""},
		{"connect stays here", "one", call("ssh_connect", "dev"), false, ""},
		{"list stays here", "one", call("ssh_list_sessions", ""), false, ""},
		{"unknown session", "one", call("ssh_exec", "nope"), false, ""},
		{"owner stopped heartbeating", "one", call("ssh_exec", "dev"), true, "gone"},
		{"notification (no id)", "one", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"ssh_exec","arguments":{"sessionName":"dev"}}}`, false, ""},
		{"batch", "one", "[" + call("ssh_exec", "dev") + "]", false, ""},
		{"garbage", "one", `{"jsonrpc":`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := time.Now()
			if tc.stale {
				hb = hb.Add(-time.Minute)
			}
			n, o := routeNode(hb)
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tc.body))
			if tc.auth != "" {
				r.Header.Set("Authorization", "Bearer "+tc.auth)
			}
			base, gone := routeAs(n, o, r, []byte(tc.body))
			got := base
			if gone != nil {
				got = "gone"
			}
			if got != tc.want {
				t.Fatalf("route = %q (gone %v); want %q", base, gone, tc.want)
			}
		})
	}
}

// FuzzRoute: no request body makes the router panic, and none without a
// verified caller is ever sent elsewhere.
func FuzzRoute(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_exec","arguments":{"sessionName":"dev"}}}`), true)
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"tandem://output/c1/x"}}`), false)
	f.Add([]byte(`[{"id":1}]`), true)
	f.Fuzz(func(t *testing.T, body []byte, authed bool) {
		n, o := routeNode(time.Now())
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if authed {
			r.Header.Set("Authorization", "Bearer one")
		}
		base, _ := routeAs(n, o, r, body)
		if !authed && base != "" {
			t.Fatalf("an unauthenticated request was routed to %s", base)
		}
	})
}

// urlDir is dir with node "a" at url.
type urlDir struct {
	dir
	url string
}

func (d urlDir) Instance(_ context.Context, id string) (store.Instance, error) {
	if id == "a" {
		return store.Instance{ID: "a", URL: d.url, HeartbeatAt: time.Now()}, nil
	}
	return store.Instance{}, store.ErrNotFound
}

// TestForwardSaysWhetherDelivered: a forwarded call whose owner never got
// it did not run there; one the owner received before it stopped
// answering (killed mid-command) may have, and the reply must not tell the
// agent otherwise. An owner that answers is passed through.
func TestForwardSaysWhetherDelivered(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String()
	_ = closed.Close()
	dies := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the whole call arrived
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = c.Close() // and the node died before answering
		}
	}))
	t.Cleanup(dies.Close)
	answers := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"from":"owner"}}`)
	}))
	t.Cleanup(answers.Close)
	signer, err := NewSigner([]byte(strings.Repeat("k", 32)), "b")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_exec","arguments":{"sessionName":"dev","sessionToken":"x","command":"rm -rf build"}}}`
	for _, tc := range []struct {
		name, url string
		want      string // "owner", or the delivered flag Unreachable got
	}{
		{"owner not listening", refused, "false"},
		{"owner died with the call", dies.URL, "true"},
		{"owner answers", answers.URL, "owner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, o := routeNode(time.Now())
			n.Dir, n.Signer = urlDir{url: tc.url}, signer
			n.Transport = &http.Transport{} // no connection shared between cases
			o.Unreachable = func(id json.RawMessage, tool, session string, err error, delivered bool) []byte {
				return []byte(`{"delivered":` + strconv.FormatBool(delivered) + `}`)
			}
			h := n.MCP(http.NotFoundHandler(), o)
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer one")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			got := w.Body.String()
			switch tc.want {
			case "owner":
				if !strings.Contains(got, `"from":"owner"`) {
					t.Fatalf("reply %q, want the owner's", got)
				}
			default:
				if got != `{"delivered":`+tc.want+`}` {
					t.Fatalf("reply %q, want delivered=%s", got, tc.want)
				}
			}
		})
	}
}

// TestForwardingRecord: the node remembers where each forwarded call runs
// until it is answered, so a cancellation can follow it; two calls of one
// key both count, and the record ends with the last.
func TestForwardingRecord(t *testing.T) {
	n := &Node{}
	k := forwardKey{Caller{Tenant: "t", Actor: "a", Owner: "sid:1"}, "7"}
	other := forwardKey{Caller{Tenant: "u", Actor: "a", Owner: "sid:1"}, "7"}
	if got, _ := n.forwardedTo(k); got.base != "" {
		t.Fatalf("before any forward: %q", got)
	}
	done1 := n.forwarding(k, dest{"a", "http://a"})
	done2 := n.forwarding(k, dest{"b", "http://b"})
	if got, _ := n.forwardedTo(k); got.base != "http://a" {
		t.Fatalf("forwardedTo = %q, want http://a", got)
	}
	if got, _ := n.forwardedTo(other); got.base != "" {
		t.Fatalf("another tenant's key finds %q", got)
	}
	done1()
	if got, _ := n.forwardedTo(k); got.base != "http://b" {
		t.Fatalf("after the first answered: %q, want http://b", got)
	}
	done2()
	if got, _ := n.forwardedTo(k); got.base != "" || len(n.inFlight) != 0 {
		t.Fatalf("after both answered: %q, %d keys left", got, len(n.inFlight))
	}
}

// TestSpreadBudget: a caller's cancellations sent on to other nodes are
// bounded per second; another caller keeps its own budget, and a new second
// brings a new one.
func TestSpreadBudget(t *testing.T) {
	var b spreadBudget
	alice, bob := Caller{Tenant: "t", Actor: "alice", Owner: "sid:1"}, Caller{Tenant: "t", Actor: "bob", Owner: "sid:2"}
	now := time.Now()
	for i := range spreadPerSecond {
		if !b.take(alice, now.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("send %d of the first second refused", i+1)
		}
	}
	if b.take(alice, now.Add(500*time.Millisecond)) {
		t.Fatal("a send past the second's budget was allowed")
	}
	if !b.take(bob, now.Add(500*time.Millisecond)) {
		t.Fatal("another caller's send was refused")
	}
	if !b.take(alice, now.Add(1100*time.Millisecond)) {
		t.Fatal("a send in the next second was refused")
	}
}
