package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/preview"
	"github.com/tandem-sh/tandem/internal/web"
)

// previews is the sessions' forwarded ports, as the tools and the page
// use them, with each forward's end audited under its session.
type previews struct {
	*preview.Manager
	s *Server

	mu     sync.Mutex
	owners map[previewKey]audit.Record // the session fields of each open forward
}

type previewKey struct {
	key  string
	port int
}

// newPreviews listens for forwards on the web listener's host, with its
// TLS; the operator token never reaches a session's server.
func newPreviews(s *Server) *previews {
	p := &previews{s: s, owners: map[previewKey]audit.Record{}}
	host, _, err := net.SplitHostPort(s.ln.Addr().String())
	if err != nil {
		host = "127.0.0.1"
	}
	o := &preview.Options{
		Host: host,
		TandemCredential: func(v string) bool {
			return s.opTok != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.opTok)) == 1
		},
		Closed: p.closed,
		Logger: s.log,
	}
	if s.hm != nil && s.hm.on() {
		// Forwards serve what tandem's listener serves: TLS with its
		// certificate where it has one.
		o.TLS = s.hm.tls
	}
	p.Manager = preview.New(o)
	return p
}

// Open forwards a port and remembers whose it is, for the audit of its end.
func (p *previews) Open(key string, port int, dial preview.DialFunc, done <-chan struct{}) (preview.Forward, bool, error) {
	f, created, err := p.Manager.Open(key, port, dial, done)
	if err == nil && created {
		rec := audit.Record{}
		if sess, ok := p.s.sessions.ByMonitorKey(key); ok {
			rec.Tenant, rec.Actor, rec.SessionID, rec.SessionName, rec.Target = sess.Caller().Tenant, sess.Caller().Actor, sess.ID, sess.Name, sess.Target.Name
		}
		p.mu.Lock()
		p.owners[previewKey{key, port}] = rec
		p.mu.Unlock()
	}
	return f, created, err
}

// closed audits a forward's end: its opening is the ssh_forward_port call's record.
func (p *previews) closed(f preview.Forward, reason string) {
	p.mu.Lock()
	rec := p.owners[previewKey{f.Key, f.Port}]
	delete(p.owners, previewKey{f.Key, f.Port})
	p.mu.Unlock()
	rec.Time, rec.Tool, rec.Event, rec.Outcome, rec.Reason = time.Now(), "ssh_forward_port", audit.EventPortClosed, audit.OutcomeOK, reason
	rec.Args, _ = json.Marshal(map[string]int{"port": f.Port})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.s.rec.audit.Append(ctx, rec); err != nil {
		p.s.log.Error("audit: a forwarded port's end could not be recorded", "port", f.Port, "err", err)
	}
}

// Ports lists the session's forwarded ports, for the page.
func (p *previews) Ports(key string) []int {
	var out []int
	for _, f := range p.List(key) {
		out = append(out, f.Port)
	}
	return out
}

// Enter is preview.Manager's, with its not-forwarded error as the page's.
func (p *previews) Enter(key string, port int, host, next string) (string, error) {
	u, err := p.Manager.Enter(key, port, host, next)
	if errors.Is(err, preview.ErrNotForwarded) {
		err = errors.Join(err, web.ErrNoPreview)
	}
	return u, err
}
