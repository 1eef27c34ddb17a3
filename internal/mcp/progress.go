package mcp

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressEvery is how often a running command's output is sent to a
// client that asked for progress.
const progressEvery = 200 * time.Millisecond

// progressMax bounds one notification's text; the full output always comes
// in the reply.
const progressMax = 64 << 10

// progress streams output to the client as notifications/progress.
type progress struct {
	ss    *mcp.ServerSession
	token any

	mu      sync.Mutex
	pending []byte
	total   int64

	stop chan struct{}
	done chan struct{}
}

// startProgress returns nil when the client did not ask for progress.
func startProgress(ctx context.Context) *progress {
	req := callFrom(ctx).req
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	p := &progress{ss: req.Session, token: tok, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx)
	return p
}

// add is the shell's OnOutput hook: it must not block.
func (p *progress) add(_ int, b []byte) {
	p.mu.Lock()
	p.total += int64(len(b))
	p.pending = append(p.pending, b...)
	if over := len(p.pending) - progressMax; over > 0 {
		p.pending = append(p.pending[:0], p.pending[over:]...)
	}
	p.mu.Unlock()
}

func (p *progress) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			p.flush(ctx)
			return
		case <-ctx.Done():
			return
		case <-t.C:
			p.flush(ctx)
		}
	}
}

func (p *progress) flush(ctx context.Context) {
	p.mu.Lock()
	msg, total := string(p.pending), p.total
	p.pending = p.pending[:0]
	p.mu.Unlock()
	if msg == "" {
		return
	}
	_ = p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(total), Message: msg})
}

// finish sends what is left and stops.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
}

// hook is the OnOutput function for the shell, nil without progress.
func (p *progress) hook() func(int, []byte) {
	if p == nil {
		return nil
	}
	return p.add
}
