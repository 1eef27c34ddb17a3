package mcp

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressEvery is how often a running command's output is sent to a
// client that asked for progress.
const progressEvery = 200 * time.Millisecond

// DefaultHeartbeat is the longest a client that asked for progress waits
// without a notification while a command runs, output or not: clients
// that reset their request timeout on progress then wait for long
// commands instead of giving up on them (the issue asks for 10 s at most).
const DefaultHeartbeat = 5 * time.Second

// progressMax bounds one notification's text; the full output always comes
// in the reply or from ssh_read_output.
const progressMax = 16 << 10

// progress streams output to the client as notifications/progress. The
// progress value is the seconds since the command started, so it rises
// with every notification, heartbeats included.
type progress struct {
	ss        *mcp.ServerSession
	token     any
	start     time.Time
	heartbeat time.Duration

	mu      sync.Mutex
	pending []byte
	total   int64
	last    time.Time // the last notification sent

	stop chan struct{}
	done chan struct{}
}

// startProgress returns nil when the client did not ask for progress.
func startProgress(ctx context.Context, heartbeat time.Duration) *progress {
	req := callFrom(ctx).req
	if req == nil || req.Session == nil || req.Params == nil {
		return nil
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return nil
	}
	now := time.Now()
	p := &progress{ss: req.Session, token: tok, start: now, last: now, heartbeat: heartbeat,
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(ctx)
	return p
}

// add is the shell's OnOutput hook: it must not block.
func (p *progress) add(_ int, b []byte) {
	p.mu.Lock()
	p.total += int64(len(b))
	p.pending = trimLines(append(p.pending, b...), progressMax)
	p.mu.Unlock()
}

// trimLines keeps at most max bytes of the end of b, starting at a line:
// a client that shows progress messages never sees half a line at the
// top. A single line longer than max is cut at a character.
func trimLines(b []byte, max int) []byte {
	over := len(b) - max
	if over <= 0 {
		return b
	}
	if i := bytes.IndexByte(b[over:], '\n'); i >= 0 && over+i+1 < len(b) {
		return append(b[:0], b[over+i+1:]...)
	}
	for over < len(b) && !utf8.RuneStart(b[over]) {
		over++
	}
	return append(b[:0], b[over:]...)
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

// flush sends what is pending, or a heartbeat when nothing was sent for
// p.heartbeat. A character split across two writes waits for its end.
func (p *progress) flush(ctx context.Context) {
	p.mu.Lock()
	n := len(p.pending)
	for k := 1; k <= utf8.UTFMax && k <= n; k++ {
		if utf8.RuneStart(p.pending[n-k]) {
			if !utf8.FullRune(p.pending[n-k:]) {
				n -= k
			}
			break
		}
	}
	msg := string(p.pending[:n])
	p.pending = append(p.pending[:0], p.pending[n:]...)
	now := time.Now()
	if msg == "" && now.Sub(p.last) < p.heartbeat {
		p.mu.Unlock()
		return
	}
	p.last = now
	p.mu.Unlock()
	_ = p.ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token,
		Progress: float64(now.Sub(p.start).Milliseconds()) / 1000, Message: msg})
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

// waitNotes is the onWait of a call that waits for a person: a note
// "waiting N s <what>" at most once per every, or nil without progress.
func (p *progress) waitNotes(ctx context.Context, every time.Duration, what string) func(waited time.Duration) {
	if p == nil {
		return nil
	}
	sent := time.Duration(0)
	return func(waited time.Duration) {
		if waited-sent < every {
			return
		}
		sent = waited
		p.note(ctx, fmt.Sprintf("waiting %.0f s %s", waited.Seconds(), what))
	}
}
