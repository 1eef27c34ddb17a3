package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callDoneKey is where a tool call's cancellation signal travels in
// auth.TokenInfo.Extra, from the HTTP layer to the tool's handler.
const callDoneKey = "tandem.callDone"

// maxPeekBytes is the most of a request body the cancellation layer reads
// to find the message's method and id: the SDK's own limit, above which it
// refuses the request anyway.
const maxPeekBytes = mcp.DefaultMaxRequestBodyBytes

// inflight gives the tool calls served over HTTP the cancellation that a
// stdio client gets from the SDK. The stateless handler serves every
// request in a session of its own, so it cannot match a client's
// notifications/cancelled (a request of its own) to the call it names, and
// it leaves a call running when the client drops the request. inflight
// tracks each running tools/call by its verified caller and JSON-RPC id,
// and ends the call's context when the client cancels it by either route.
type inflight struct {
	mu    sync.Mutex
	calls map[inflightKey][]*callEntry
	// emptied, if set, is closed when the last call in flight ends.
	emptied chan struct{}
}

// inflightKey names a call as its client does: JSON-RPC ids are the client's
// own, so the key holds the verified caller too, and no one can cancel a
// call of another tenant, actor or agent run.
type inflightKey struct{ caller, id string }

type callEntry struct{ cancel context.CancelFunc }

// rpcEnvelope is the part of a JSON-RPC message the layer reads.
type rpcEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
	} `json:"params"`
}

func newInflight() *inflight { return &inflight{calls: map[inflightKey][]*callEntry{}} }

// wrap serves next with cancellation for the tool calls it runs. It must sit
// inside the bearer check, which puts the verified claim on the request.
func (f *inflight) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := auth.TokenInfoFromContext(r.Context())
		c := claimOfToken(ti)
		if r.Method != http.MethodPost || c == nil || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, maxPeekBytes+1))
		// The SDK reads the body as it came, whole, and makes its own
		// checks and refusals.
		r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		var msg rpcEnvelope
		if err != nil || len(head) > maxPeekBytes || json.Unmarshal(head, &msg) != nil {
			next.ServeHTTP(w, r)
			return
		}
		caller := c.Tenant + "\x00" + c.Actor + "\x00" + c.SID
		switch {
		case msg.Method == "tools/call" && len(msg.ID) > 0:
			key := inflightKey{caller, idKey(msg.ID)}
			// The call ends when its client cancels it, or drops the
			// request that would carry its reply.
			ctx, cancel := context.WithCancel(r.Context())
			e := &callEntry{cancel: cancel}
			f.add(key, e)
			defer f.remove(key, e)
			defer cancel()
			if ti.Extra == nil {
				ti.Extra = map[string]any{}
			}
			ti.Extra[callDoneKey] = ctx
		case msg.Method == "notifications/cancelled" && len(msg.Params.RequestID) > 0:
			f.cancel(inflightKey{caller, idKey(msg.Params.RequestID)})
		}
		next.ServeHTTP(w, r)
	})
}

func (f *inflight) add(k inflightKey, e *callEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[k] = append(f.calls[k], e)
}

func (f *inflight) remove(k inflightKey, e *callEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rest := f.calls[k][:0]
	for _, x := range f.calls[k] {
		if x != e {
			rest = append(rest, x)
		}
	}
	if len(rest) == 0 {
		delete(f.calls, k)
		if len(f.calls) == 0 && f.emptied != nil {
			close(f.emptied)
			f.emptied = nil
		}
		return
	}
	f.calls[k] = rest
}

// idle waits until no tool call is in flight, its reply written, or ctx
// ends.
func (f *inflight) idle(ctx context.Context) error {
	for {
		f.mu.Lock()
		if len(f.calls) == 0 {
			f.mu.Unlock()
			return nil
		}
		if f.emptied == nil {
			f.emptied = make(chan struct{})
		}
		ch := f.emptied
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Settle waits until every tool call served over HTTP has returned and its
// reply has been written, or ctx ends: a graceful shutdown calls it after
// it has refused what could still wait (new sessions, pending approvals),
// so that no call in flight loses its answer.
func (s *Server) Settle(ctx context.Context) error {
	return s.inflight.idle(ctx)
}

// cancel ends every call running under k. Two clients of one agent run
// can both have a call of the same id in flight; nothing in a stateless
// request tells them apart, so both end, and each is told so.
func (f *inflight) cancel(k inflightKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.calls[k] {
		e.cancel()
	}
}

// idKey is a JSON-RPC id in a form that tells the number 7 from the
// string "7", as JSON-RPC does.
func idKey(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "?" + string(raw)
	}
	switch v := v.(type) {
	case string:
		return "s" + v
	case json.Number:
		return "n" + v.String()
	}
	return "?" + string(raw)
}

// callDone returns the cancellation signal the HTTP layer gave a call, or
// nil (over stdio the SDK cancels the handler's context itself).
func callDone(extra *mcp.RequestExtra) context.Context {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	done, _ := extra.TokenInfo.Extra[callDoneKey].(context.Context)
	return done
}

// readCloser reads from r and closes c: a body read ahead and put back.
type readCloser struct {
	io.Reader
	c io.Closer
}

func (b readCloser) Close() error { return b.c.Close() }
