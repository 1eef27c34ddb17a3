package mcp

import (
	"encoding/json"

	"github.com/tandem-sh/tandem/internal/session"
)

// targetNamer is implemented by Targets that can list a tenant's target
// names (target.Resolver), for the reconnect example of a reply.
type targetNamer interface {
	TargetNames(tenant string) []string
}

// reconnect is the ssh_connect call a reply suggests to the caller after
// its session ended: with the name of the tenant's target when it has
// one only, so the example is a call that works as written, never a
// target that does not exist for this caller; else with a placeholder.
func (s *Server) reconnect(c session.Caller) string {
	if tn, ok := s.deps.Targets.(targetNamer); ok {
		if names := tn.TargetNames(c.Tenant); len(names) == 1 {
			b, err := json.Marshal(map[string]string{"name": "my-session", "target": names[0]})
			if err == nil {
				return "ssh_connect " + string(b)
			}
		}
	}
	return reconnectExample
}
