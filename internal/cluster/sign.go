package cluster

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The headers of a signed request between nodes.
const (
	headerNode      = "X-Tandem-Node"
	headerTo        = "X-Tandem-To"
	headerTime      = "X-Tandem-Time"
	headerNonce     = "X-Tandem-Nonce"
	headerBody      = "X-Tandem-Body"
	headerSignature = "X-Tandem-Signature"
)

// MinSecretLen is the shortest cluster secret accepted, in bytes.
const MinSecretLen = 32

// maxSkew is how far a signed request's time may be from the receiver's
// clock: it bounds how long a captured request could be replayed.
const maxSkew = 30 * time.Second

// ErrBadSignature means a request claimed to come from a node but its
// signature did not check out: a wrong secret, a stale or future time, or
// a changed request.
var ErrBadSignature = errors.New("cluster: request signature does not verify")

// Signer signs and checks requests between the nodes of one cluster.
// Each signed request names the node it is for, and carries a random
// nonce that node accepts once: a request captured on the wire can be
// sent again neither to its node nor to another (nor to the process that
// replaces its node, which has another instance id).
type Signer struct {
	secret []byte
	self   string
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // nonce -> its request's time, kept for 2*maxSkew
}

// NewSigner returns the Signer of node self. The secret must be at least
// MinSecretLen bytes and the same on every node.
func NewSigner(secret []byte, self string) (*Signer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("cluster: the secret is %d bytes; it must be at least %d (e.g. openssl rand -hex 32)", len(secret), MinSecretLen)
	}
	return &Signer{secret: append([]byte(nil), secret...), self: self, now: time.Now, seen: map[string]time.Time{}}, nil
}

// Sign marks r as sent by this node to the node with instance id to;
// body is r's whole body (nil for none).
func (s *Signer) Sign(r *http.Request, body []byte, to string) {
	ts := strconv.FormatInt(s.now().Unix(), 10)
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	nonce := hex.EncodeToString(raw)
	bh := sha256.Sum256(body)
	r.Header.Set(headerNode, s.self)
	r.Header.Set(headerTo, to)
	r.Header.Set(headerTime, ts)
	r.Header.Set(headerNonce, nonce)
	r.Header.Set(headerBody, hex.EncodeToString(bh[:]))
	r.Header.Set(headerSignature, s.mac(r, s.self, to, ts, nonce, r.Header.Get(headerBody)))
}

// Signed reports whether r claims to come from a node, rightly or not.
func Signed(r *http.Request) bool {
	return r.Header.Get(headerSignature) != "" || r.Header.Get(headerNode) != ""
}

// Verify checks r's signature over body and returns the node it came from.
func (s *Signer) Verify(r *http.Request, body []byte) (string, error) {
	from, err := s.VerifyHeaders(r)
	if err != nil {
		return "", err
	}
	if !BodyMatches(r, body) {
		return "", fmt.Errorf("%w: the body is not the one signed", ErrBadSignature)
	}
	return from, nil
}

// VerifyHeaders checks r's signature before its body is read: the
// signature covers the body's hash, which [BodyMatches] checks once the
// body is read. It returns the node r came from, and spends r's nonce.
func (s *Signer) VerifyHeaders(r *http.Request) (string, error) {
	node, to, ts, nonce, bh, sig := r.Header.Get(headerNode), r.Header.Get(headerTo), r.Header.Get(headerTime),
		r.Header.Get(headerNonce), r.Header.Get(headerBody), r.Header.Get(headerSignature)
	sec, err := strconv.ParseInt(ts, 10, 64)
	if node == "" || sig == "" || len(nonce) != 32 || len(bh) != 64 || err != nil {
		return "", ErrBadSignature
	}
	if to != s.self {
		return "", fmt.Errorf("%w: it was signed for node %q, not this one", ErrBadSignature, to)
	}
	now := s.now()
	if d := now.Sub(time.Unix(sec, 0)); d > maxSkew || d < -maxSkew {
		return "", fmt.Errorf("%w: its time is %v off this node's clock", ErrBadSignature, d.Round(time.Second))
	}
	want := s.mac(r, node, to, ts, nonce, bh)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return "", ErrBadSignature
	}
	if !s.fresh(nonce, now) {
		return "", fmt.Errorf("%w: a request with this nonce was already served (a replay)", ErrBadSignature)
	}
	return node, nil
}

// BodyMatches reports whether body is the one r's verified signature covers.
func BodyMatches(r *http.Request, body []byte) bool {
	bh := sha256.Sum256(body)
	return hmac.Equal([]byte(r.Header.Get(headerBody)), []byte(hex.EncodeToString(bh[:])))
}

// fresh records a verified request's nonce and reports whether it is new.
// A nonce is kept for twice the skew allowed, longer than any request
// bearing it is accepted, then forgotten.
func (s *Signer) fresh(nonce string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.seen[nonce]; dup {
		return false
	}
	if len(s.seen) >= 1024 && len(s.seen)%1024 == 0 {
		for n, at := range s.seen {
			if now.Sub(at) > 2*maxSkew {
				delete(s.seen, n)
			}
		}
	}
	s.seen[nonce] = now
	return true
}

// mac covers what the request does: method, path and query, sender,
// receiver, time, nonce and the body's hash.
func (s *Signer) mac(r *http.Request, from, to, ts, nonce, bodyHash string) string {
	m := hmac.New(sha256.New, s.secret)
	for _, part := range []string{"tandem-cluster-v2", r.Method, r.URL.RequestURI(), from, to, ts, nonce, bodyHash} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}
