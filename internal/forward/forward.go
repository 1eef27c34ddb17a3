// Package forward carries a pending approval to an upstream approver and
// its answer back: the seed's "forward to parent". A tandem whose policy
// says forward POSTs the approval, with a bearer token, to an upstream
// URL; the upstream answers allow or deny at once, or pending, and the
// agent's repeat of its call asks again and picks the answer up. A tandem
// is itself such an upstream (POST /api/approvals), so chains of tandems
// end at a human's dashboard.
//
//	child tandem ──POST {approval, waitSeconds}──▶ upstream
//	             ◀── {"behavior":"allow"|"deny"|"pending", "message", "id"} ──
//
// An upstream that is not a tandem may also answer later: it POSTs the
// decision to the downstream's /api/approvals/{id}/decision with the
// downstream's operator token as its bearer token. The package knows
// nothing of MCP or policies: it is told the approval.
package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
)

// Behaviors of an Answer.
const (
	Allow   = "allow"
	Deny    = "deny"
	Pending = "pending"
)

// Request is what a forwarding tandem sends upstream.
type Request struct {
	// Approval is the downstream's pending approval: its id, the action,
	// the fingerprint, the rule and reason that asked, and its expiry.
	Approval approval.Request `json:"approval"`
	// WaitSeconds is how long the downstream's call can wait for the
	// answer; the upstream answers pending by then.
	WaitSeconds int `json:"waitSeconds,omitempty"`
}

// Answer is the upstream's reply.
type Answer struct {
	Behavior string `json:"behavior"`
	Message  string `json:"message,omitempty"`
	// ID and ExpiresAt name the upstream's own pending approval.
	ID        string    `json:"id,omitempty"`
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// DecidedBy says who decided upstream, e.g. dashboard or rule.
	DecidedBy string `json:"decidedBy,omitempty"`
}

// ErrUpstream wraps every failure to get an answer from the upstream.
var ErrUpstream = errors.New("the upstream approver gave no answer")

// maxAnswer bounds an upstream's reply.
const maxAnswer = 64 << 10

// Client forwards approvals to one upstream.
type Client struct {
	// URL is the upstream's endpoint, e.g. https://parent:7777/api/approvals.
	URL string
	// Token is sent as the bearer token; never logged.
	Token string
	// RootCAs, if set, are the CAs an https upstream's certificate is
	// checked against, instead of the system's.
	RootCAs *x509.CertPool
	// HTTP is the client to use; nil means one that checks the upstream's
	// certificate (against RootCAs), follows no redirect (the token would
	// go wherever the upstream pointed), and has no overall timeout (each
	// Ask is bounded by its wait).
	HTTP *http.Client

	once sync.Once
	hc   *http.Client
}

// client returns the HTTP client Ask uses.
func (c *Client) client() *http.Client {
	c.once.Do(func() {
		if c.HTTP != nil {
			c.hc = c.HTTP
			return
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: c.RootCAs, MinVersion: tls.VersionTLS12}
		c.hc = &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}}
	})
	return c.hc
}

// Ask sends the approval and returns the upstream's answer, waiting at
// most wait (plus a little for the answer to travel).
func (c *Client) Ask(ctx context.Context, r Request, wait time.Duration) (Answer, error) {
	r.WaitSeconds = max(int(wait/time.Second), 1)
	body, err := json.Marshal(r)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := c.client().Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %v", ErrUpstream, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Answer{}, fmt.Errorf("%w: read the answer: %v", ErrUpstream, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Answer{}, fmt.Errorf("%w: %s answered %s", ErrUpstream, c.URL, resp.Status)
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return Answer{}, fmt.Errorf("%w: the answer is not JSON: %v", ErrUpstream, err)
	}
	switch a.Behavior {
	case Allow, Deny, Pending:
		return a, nil
	}
	return Answer{}, fmt.Errorf("%w: behavior %q is none of allow, deny, pending", ErrUpstream, a.Behavior)
}
