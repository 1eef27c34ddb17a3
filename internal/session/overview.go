package session

import (
	"sort"
	"time"
)

// Overview is one session as the operator's dashboard lists it. It holds
// no capability: the monitoring key is given out only on request.
type Overview struct {
	ID, Name, Tenant, Actor, Target, Kind, Status string
	LastCommand                                   string
	CreatedAt, LastActivity, EndedAt              time.Time
	Ended                                         bool
	// HumanRequest is the agent's open request for the human, its
	// message, or "".
	HumanRequest string
	// Owner is the owning caller's id: a stdio connection's "conn-…",
	// which the dashboard names by its client when Actor is empty.
	Owner string
	// Connections are the session's open connections through the egress
	// proxy, as host:port.
	Connections []string
	// EndReason says why an ended session ended (idle_timeout,
	// human_exit, ...), so that the dashboard can show it; "" while live.
	EndReason string
}

// Overview lists every caller's live sessions and this process's ended
// sessions whose recording can be replayed, newest first: the operator
// sees all tenants.
func (m *Manager) Overview() []Overview {
	m.mu.Lock()
	all := make([]*Session, 0, len(m.sessions)+len(m.replays))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	for _, s := range m.replays {
		all = append(all, s)
	}
	m.mu.Unlock()
	out := make([]Overview, 0, len(all))
	for _, s := range all {
		i := s.Info()
		s.mu.Lock()
		o := Overview{ID: s.ID, Name: s.Name, Tenant: s.caller.Tenant, Actor: s.caller.Actor, Target: i.Target,
			Kind: i.Kind, Status: i.Status, LastCommand: s.lastCommand, CreatedAt: s.CreatedAt,
			LastActivity: s.lastActivity, EndedAt: s.endedAt, Ended: s.endReason != "", Owner: s.caller.ID,
			EndReason: s.endReason}
		if r := s.request; r != nil && !r.HandedBack && s.endReason == "" {
			o.HumanRequest = r.Message
		}
		s.mu.Unlock()
		if s.endReason == "" {
			for _, c := range s.OpenConnections() {
				o.Connections = append(o.Connections, c.Target())
			}
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

// MonitorKeyOf returns the capability key of a live session, or of an
// ended one this process can replay, by session id.
func (m *Manager) MonitorKeyOf(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.sessions {
		if s.ID == id {
			return s.monitorKey, true
		}
	}
	for _, s := range m.replays {
		if s.ID == id {
			return s.monitorKey, true
		}
	}
	return "", false
}

// Changes calls fn whenever a session starts, ends or finishes a command,
// until stop is called. fn must not block: it should only signal.
func (m *Manager) Changes(fn func()) (stop func()) {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	if m.watchers == nil {
		m.watchers = map[int]func(){}
	}
	id := m.nextWatcher
	m.nextWatcher++
	m.watchers[id] = fn
	return func() {
		m.watchMu.Lock()
		defer m.watchMu.Unlock()
		delete(m.watchers, id)
	}
}

func (m *Manager) changed() {
	m.watchMu.Lock()
	defer m.watchMu.Unlock()
	for _, fn := range m.watchers {
		fn()
	}
}
