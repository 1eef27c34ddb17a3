package mcp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tandem-sh/tandem/internal/preview"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
)

// Previews holds the sessions' forwarded ports (*preview.Manager).
type Previews interface {
	Open(key string, port int, dial preview.DialFunc, done <-chan struct{}) (preview.Forward, bool, error)
	List(key string) []preview.Forward
}

// probeTimeout bounds ssh_forward_port's look at whether something
// listens on the port already.
const probeTimeout = 3 * time.Second

type forwardPortArgs struct {
	SessionName  string `json:"sessionName"`
	SessionToken string `json:"sessionToken"`
	Port         *int   `json:"port"`
}

// forwardPort makes a preview URL for a port the session listens on (or
// will): the human opens it signed in as the operator or admitted, never
// with the watch link alone. It is gated and judged like any action on
// the session.
func (s *Server) forwardPort(ctx context.Context, c session.Caller, a forwardPortArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, sessionArgs{a.SessionName, a.SessionToken})
	if err != nil {
		return nil, err
	}
	if a.Port == nil {
		return nil, invalidArg("port", "is missing: pass the port your server listens on in the session, e.g. 3000")
	}
	port := *a.Port
	if port < 1 || port > 65535 {
		return nil, invalidArg("port", "must be between 1 and 65535, got %d", port)
	}
	if s.deps.Previews == nil || s.deps.MonitorURL == nil {
		return nil, fail(codePreviewUnavailable, "This tandem serves no previews (it has no web listener).", nil)
	}
	if err := sess.AgentMayAct(); err != nil {
		return nil, err
	}
	if err := sess.Gate(); err != nil {
		return nil, err
	}
	if err := s.authorize(ctx, c, "ssh_forward_port", sess.Target.Name, sessionAction(c, sess, "ssh_forward_port", "port "+strconv.Itoa(port))); err != nil {
		return nil, err
	}
	key := sess.MonitorKey()
	_, created, err := s.deps.Previews.Open(key, port, sess.DialPort, sess.Done())
	switch {
	case errors.Is(err, preview.ErrTooMany):
		return nil, fail(codePortLimit, fmt.Sprintf("This session forwards as many ports as it may (%d). Reuse one of them (ssh_list_ports), or forward from another session.", len(s.deps.Previews.List(key))), reply{"port": port})
	case errors.Is(err, preview.ErrNotForwarded) && sess.Err() != nil:
		return nil, sess.Err() // the session ended meanwhile
	case err != nil:
		return nil, fail(codePreviewUnavailable, "The port could not be forwarded: "+err.Error(), reply{"port": port})
	}
	listening, why := s.probePort(ctx, sess, port)
	r := reply{"port": port, "url": s.previewURL(key, port), "listening": listening, "created": created}
	msg := fmt.Sprintf("Port %d is forwarded. Give the human url: it opens for tandem's signed-in operator or a viewer they admitted (never with the monitoring link alone), and ends with the session.", port)
	if !listening {
		msg += fmt.Sprintf(" Nothing answers on port %d in the session yet (%s): the preview shows an error page until your server listens there (on 127.0.0.1 or 0.0.0.0).", port, why)
	}
	r["message"] = msg
	return ok(r), nil
}

// probePort reports whether something answers on port in the session now.
func (s *Server) probePort(ctx context.Context, sess *session.Session, port int) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nc, err := sess.DialPort(ctx, port)
	if err != nil {
		if errors.Is(err, shell.ErrNoPorts) {
			return false, "this session's transport cannot reach its ports"
		}
		return false, err.Error()
	}
	_ = nc.Close()
	return true, ""
}

// previewURL is the link on tandem's origin for the session's port.
func (s *Server) previewURL(key string, port int) string {
	return s.deps.MonitorURL(key) + "/port/" + strconv.Itoa(port) + "/"
}

// listPorts lists the session's forwarded ports. Read-only: it neither
// trips nor resets the gate.
func (s *Server) listPorts(ctx context.Context, c session.Caller, a sessionArgs) (reply, error) {
	sess, err := s.lookup(ctx, c, a)
	if err != nil {
		return nil, err
	}
	ports := []any{}
	if s.deps.Previews != nil && s.deps.MonitorURL != nil {
		key := sess.MonitorKey()
		for _, f := range s.deps.Previews.List(key) {
			ports = append(ports, reply{"port": f.Port, "url": s.previewURL(key, f.Port), "openedAt": f.Opened.UTC().Format(time.RFC3339)})
		}
	}
	return ok(reply{"ports": ports}), nil
}
