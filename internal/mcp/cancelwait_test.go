package mcp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/mcp"
)

// stuckAuditor takes records, but once stuck its Ready waits until the
// caller gives up, as a store whose write lock another process holds.
type stuckAuditor struct {
	mu      sync.Mutex
	stuck   bool
	waiting chan struct{} // closed when a Ready starts waiting
	records []audit.Record
	added   chan audit.Record
}

func (a *stuckAuditor) Append(_ context.Context, r audit.Record) (audit.Record, error) {
	a.mu.Lock()
	a.records = append(a.records, r)
	a.mu.Unlock()
	a.added <- r
	return r, nil
}

func (a *stuckAuditor) Ready(ctx context.Context) error {
	a.mu.Lock()
	stuck := a.stuck
	a.mu.Unlock()
	if !stuck {
		return nil
	}
	close(a.waiting)
	<-ctx.Done()
	return ctx.Err()
}

// TestCancelWhileAuditWaits: a call the client cancels while it waits for
// the audit log ran nothing and is recorded as cancelled, not as the audit
// log being unavailable, which it is not known to be.
func TestCancelWhileAuditWaits(t *testing.T) {
	a := &stuckAuditor{waiting: make(chan struct{}), added: make(chan audit.Record, 16)}
	f := newServerWith(t, 0, func(d *mcp.Deps) { d.Audit = a })
	c := f.client(t)
	s := connect(t, c, "s")
	<-a.added // the connect's record
	a.mu.Lock()
	a.stuck = true
	a.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.CS.CallTool(ctx, &sdk.CallToolParams{Name: "ssh_exec", Arguments: map[string]any{
			"sessionName": s.Name, "sessionToken": s.Token, "command": "true", "timeoutSeconds": 60}})
		done <- err
	}()
	<-a.waiting
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned no error")
	}
	select {
	case r := <-a.added:
		if r.Tool != "ssh_exec" || r.Outcome != "cancelled" {
			t.Fatalf("recorded %s with outcome %q, want ssh_exec cancelled", r.Tool, r.Outcome)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call was not recorded")
	}
}
