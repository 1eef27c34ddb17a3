package forward_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/forward"
)

func req(cmd string) forward.Request {
	return forward.Request{Approval: approval.Request{ID: "apr_x", Action: approval.Action{Tenant: "t", Tool: "ssh_exec", Command: cmd}}}
}

// TestClientAndHandler: the answer travels back; the token, the body and
// the answer are all checked.
func TestClientAndHandler(t *testing.T) {
	var seen forward.Request
	h := forward.Handler(forward.Token("op-token"), func(_ context.Context, _ forward.Forwarder, r forward.Request) forward.Answer {
		seen = r
		if strings.HasPrefix(r.Approval.Action.Command, "rm") {
			return forward.Answer{Behavior: forward.Deny, Message: "no deletions", DecidedBy: "rule"}
		}
		return forward.Answer{Behavior: forward.Allow, DecidedBy: "dashboard"}
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()

	c := &forward.Client{URL: srv.URL, Token: "op-token"}
	a, err := c.Ask(ctx, req("ls"), 3*time.Second)
	if err != nil || a.Behavior != forward.Allow || a.DecidedBy != "dashboard" || seen.WaitSeconds != 3 || seen.Approval.ID != "apr_x" {
		t.Fatalf("allow: %+v %v (sent %+v)", a, err, seen)
	}
	if a, err := c.Ask(ctx, req("rm -rf /"), time.Second); err != nil || a.Behavior != forward.Deny || a.Message != "no deletions" {
		t.Fatalf("deny: %+v %v", a, err)
	}

	for _, tc := range []struct {
		name string
		c    *forward.Client
	}{
		{"wrong token", &forward.Client{URL: srv.URL, Token: "guess"}},
		{"no token", &forward.Client{URL: srv.URL}},
		{"down", &forward.Client{URL: "http://127.0.0.1:1/api/approvals", Token: "op-token"}},
	} {
		if _, err := tc.c.Ask(ctx, req("ls"), time.Second); !errors.Is(err, forward.ErrUpstream) {
			t.Errorf("%s: %v, want ErrUpstream", tc.name, err)
		}
	}
}

// TestHandlerRefuses: bad requests decide nothing.
func TestHandlerRefuses(t *testing.T) {
	called := false
	h := forward.Handler(forward.Token("op-token"), func(context.Context, forward.Forwarder, forward.Request) forward.Answer {
		called = true
		return forward.Answer{Behavior: forward.Allow}
	})
	for _, tc := range []struct {
		name, auth, ctype, body string
		want                    int
	}{
		{"no token", "", "application/json", `{"approval":{"id":"a","action":{"tool":"ssh_exec"}}}`, 401},
		{"wrong token", "Bearer op-tokenX", "application/json", `{"approval":{"id":"a","action":{"tool":"ssh_exec"}}}`, 401},
		{"basic auth", "Basic b3AtdG9rZW4=", "application/json", `{"approval":{"id":"a","action":{"tool":"ssh_exec"}}}`, 401},
		{"form", "Bearer op-token", "application/x-www-form-urlencoded", `a=b`, 415},
		{"not json", "Bearer op-token", "application/json", `{"approval":`, 400},
		{"no id", "Bearer op-token", "application/json", `{"approval":{"action":{"tool":"ssh_exec"}}}`, 400},
		{"no tool", "Bearer op-token", "application/json", `{"approval":{"id":"a"}}`, 400},
		{"huge", "Bearer op-token", "application/json", `{"approval":{"id":"` + strings.Repeat("x", 300<<10) + `"}}`, 400},
	} {
		r := httptest.NewRequest(http.MethodPost, "/api/approvals", strings.NewReader(tc.body))
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		r.Header.Set("Content-Type", tc.ctype)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want || called {
			t.Errorf("%s: %d (decided: %v), want %d: %s", tc.name, w.Code, called, tc.want, w.Body)
		}
	}
}

// TestClientRefusesOddAnswers: an answer that is not allow, deny or
// pending is no answer.
func TestClientRefusesOddAnswers(t *testing.T) {
	for _, body := range []string{`{"behavior":"maybe"}`, `not json`, `{}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
		_, err := (&forward.Client{URL: srv.URL, Token: "x"}).Ask(context.Background(), req("ls"), time.Second)
		srv.Close()
		if !errors.Is(err, forward.ErrUpstream) {
			t.Errorf("answer %s: %v, want ErrUpstream", body, err)
		}
	}
}

// TestClientProvesUpstream: an https upstream whose certificate this
// tandem does not trust gets no request, so no token; trusted by RootCAs,
// it answers. A redirect is not followed: the token goes nowhere else.
func TestClientProvesUpstream(t *testing.T) {
	ctx := context.Background()
	var got atomic.Int32
	up := httptest.NewTLSServer(forward.Handler(func(_ context.Context, bearer string) (forward.Forwarder, bool) {
		got.Add(1)
		return forward.Forwarder{}, bearer == "op-token"
	}, func(context.Context, forward.Forwarder, forward.Request) forward.Answer {
		return forward.Answer{Behavior: forward.Allow}
	}))
	t.Cleanup(up.Close)

	c := &forward.Client{URL: up.URL, Token: "op-token"}
	if a, err := c.Ask(ctx, req("ls"), time.Second); !errors.Is(err, forward.ErrUpstream) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %+v %v", a, err)
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the untrusted upstream received %d requests", n)
	}
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	c = &forward.Client{URL: up.URL, Token: "op-token", RootCAs: roots}
	if a, err := c.Ask(ctx, req("ls"), time.Second); err != nil || a.Behavior != forward.Allow || got.Load() != 1 {
		t.Fatalf("trusted by RootCAs: %+v %v", a, err)
	}

	var stolen atomic.Int32
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		_, _ = w.Write([]byte(`{"behavior":"allow"}`))
	}))
	t.Cleanup(thief.Close)
	redirect := httptest.NewTLSServer(http.RedirectHandler(thief.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	roots.AddCert(redirect.Certificate())
	c = &forward.Client{URL: redirect.URL, Token: "op-token", RootCAs: roots}
	if a, err := c.Ask(ctx, req("ls"), time.Second); !errors.Is(err, forward.ErrUpstream) || a.Behavior == forward.Allow {
		t.Fatalf("redirected: %+v %v", a, err)
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("the redirect's target received %d requests", n)
	}
}
