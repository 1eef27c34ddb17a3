package session

import (
	"context"
	"errors"
	"time"
)

// ErrDraining refuses a new session while the server shuts down.
var ErrDraining = errors.New("tandem is shutting down and starts no new sessions")

// Drain refuses new sessions from now on and waits, until every command
// running in a live session has ended or ctx ends: a graceful shutdown's
// first half. The sessions stay up; Shutdown ends them.
func (m *Manager) Drain(ctx context.Context) {
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := false
		for _, s := range m.live(nil) {
			busy = busy || s.sh.Busy()
		}
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// EndAll ends every live session with reason and refuses new ones: a node
// that its neighbours declared lost (and whose sessions they ended in the
// store) fences itself with it, so no shell outlives its record.
func (m *Manager) EndAll(reason string) {
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	for _, s := range m.live(nil) {
		m.end(s, reason)
	}
}
