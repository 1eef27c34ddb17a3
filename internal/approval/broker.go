package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Errors of Decide.
var (
	ErrNotFound = errors.New("no such approval")
	ErrDecided  = errors.New("the approval was already decided")
)

// Journal makes requests and decisions durable (the store and the audit).
// A Requested error refuses the request: what is not recorded is not asked.
type Journal interface {
	Requested(ctx context.Context, r Request) error
	Decided(ctx context.Context, a Approval) error
}

// Options configure a Broker. Zero fields have the documented defaults.
type Options struct {
	// Wait is how long a call waits for an answer before it answers
	// approval_pending; zero means 50 s, under common clients' 60 s.
	Wait time.Duration
	// Timeout is when an unanswered approval is denied; zero means 300 s.
	Timeout time.Duration
	// MaxRemember caps "approve and remember"; zero means 60 minutes.
	MaxRemember time.Duration
	Journal     Journal
	Logger      *slog.Logger
}

// Broker keeps the approvals of one tandem process.
type Broker struct {
	o   Options
	log *slog.Logger

	mu       sync.Mutex
	byID     map[string]*entry
	byFP     map[string]*entry    // the open or unreported approval of a fingerprint
	remember map[string]time.Time // fingerprint -> allowed until
	recent   []Approval           // decided, newest last, for approvers' lists
	watchers map[int]func()       // told of every change
	nextW    int
	closed   bool // Close was called: every request is denied at once
}

type entry struct {
	a    Approval
	done chan struct{} // closed when decided
	// reported: the decision reached the agent (or was consumed by a run).
	reported bool
	// waiters counts the calls waiting on it now.
	waiters int
	timer   *time.Timer
}

const recentMax = 200

// New returns an empty broker.
func New(o Options) *Broker {
	if o.Wait <= 0 {
		o.Wait = 50 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 300 * time.Second
	}
	if o.MaxRemember <= 0 {
		o.MaxRemember = 60 * time.Minute
	}
	b := &Broker{o: o, log: o.Logger, byID: map[string]*entry{}, byFP: map[string]*entry{},
		remember: map[string]time.Time{}, watchers: map[int]func(){}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b
}

// Options returns the broker's effective options.
func (b *Broker) Options() Options { return b.o }

// Kind says how a Request call ended.
type Kind int

// The outcomes of a Request call.
const (
	// Run: approved (now, earlier, or remembered); the action may run once.
	Run Kind = iota
	// Refused: denied by an approver.
	Refused
	// TimedOut: nobody answered before the approval expired.
	TimedOut
	// Waiting: not answered yet; the agent repeats the identical call.
	Waiting
)

// Outcome is the result of a Request call.
type Outcome struct {
	Kind     Kind
	Approval Approval
	// Remembered: allowed by an earlier "approve and remember".
	Remembered bool
}

// Request asks for approval of a, waiting up to wait (zero: Options.Wait)
// for an answer. A decision already made for the same fingerprint (the
// agent repeating its call after approval_pending) is picked up at once,
// and used up: the next identical call asks again. onWait, if set, is
// called about every second while it waits.
func (b *Broker) Request(ctx context.Context, a Action, rule, reason string, wait time.Duration, onWait func(time.Duration)) (Outcome, error) {
	return b.Ask(ctx, a, rule, reason, Hooks{Wait: wait, OnWait: onWait})
}

// Hooks tune one Ask.
type Hooks struct {
	// Wait bounds the wait for an answer; zero means Options.Wait.
	Wait time.Duration
	// OnWait is called about every second while the call waits.
	OnWait func(waited time.Duration)
	// OnPending is called once, before the wait, when the action has a
	// pending approval (new or already open): the place to ask another
	// approver, such as the agent's client, for an answer. It may call
	// Decide, at once or from another goroutine.
	OnPending func(Approval)
}

// Ask is Request with all its hooks.
func (b *Broker) Ask(ctx context.Context, a Action, rule, reason string, h Hooks) (Outcome, error) {
	wait, onWait := h.Wait, h.OnWait
	if wait <= 0 {
		wait = b.o.Wait
	}
	fp := Fingerprint(a)
	now := time.Now()
	b.mu.Lock()
	if until, ok := b.remember[fp]; ok {
		if now.Before(until) {
			b.mu.Unlock()
			return Outcome{Kind: Run, Remembered: true}, nil
		}
		delete(b.remember, fp)
	}
	e := b.byFP[fp]
	if e != nil && e.lapsed(now) {
		delete(b.byFP, fp) // approved too late for any call to pick up: ask again
		e = nil
	}
	if e == nil {
		e = &entry{a: Approval{Request: Request{ID: newID(), Action: a, Fingerprint: fp, Rule: rule, Reason: reason,
			Created: now, Expires: now.Add(b.o.Timeout)}, Status: Pending}, done: make(chan struct{})}
		if j := b.o.Journal; j != nil {
			// Recorded before anyone can see it, under the lock so that no
			// decision can precede its request in the record.
			if err := j.Requested(ctx, e.a.Request); err != nil {
				b.mu.Unlock()
				return Outcome{}, fmt.Errorf("approval: record the request: %w", err)
			}
		}
		b.byID[e.a.ID] = e
		b.byFP[fp] = e
		id := e.a.ID
		if b.closed {
			b.settle(ctx, e, Denied, shutdownDecision())
		} else {
			e.timer = time.AfterFunc(b.o.Timeout, func() { b.expire(id) })
			b.changed()
		}
	}
	open := e.a
	e.waiters++ // a call waits on it: not held for a later one (see Held)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if e.waiters--; e.waiters == 0 && e.a.Status == Approved && !e.reported {
			b.changed() // approved as its caller gave up: now held
		}
	}()
	if h.OnPending != nil && open.Status == Pending {
		h.OnPending(open)
	}

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	start := time.Now()
	for {
		select {
		case <-e.done:
			return b.report(e), nil
		case <-deadline.C:
			b.mu.Lock()
			defer b.mu.Unlock()
			return Outcome{Kind: Waiting, Approval: e.a}, nil
		case <-tick.C:
			if onWait != nil {
				onWait(time.Since(start))
			}
		case <-ctx.Done():
			return Outcome{}, ctx.Err()
		}
	}
}

// report hands a decided approval to the call that picks it up, once.
func (b *Broker) report(e *entry) Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := Outcome{Approval: e.a}
	switch e.a.Status {
	case Approved:
		o.Kind = Run
	case Expired:
		o.Kind = TimedOut
	default:
		o.Kind = Refused
	}
	if !e.reported {
		e.reported = true
		if b.byFP[e.a.Fingerprint] == e {
			delete(b.byFP, e.a.Fingerprint)
		}
		if e.a.Status == Approved {
			b.changed() // no longer held (see Held)
		}
	} else if o.Kind == Run {
		// Two identical calls waited on one approval: it runs once.
		o.Kind = Waiting
	}
	return o
}

// Decide answers a pending approval; the first answer wins.
func (b *Broker) Decide(ctx context.Context, id string, d Decision) (Approval, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byID[id]
	if e == nil {
		return Approval{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if e.a.Status != Pending {
		return e.a, fmt.Errorf("%w (%s)", ErrDecided, e.a.Status)
	}
	status := Denied
	if d.Approved {
		status = Approved
	} else {
		d.Remember = 0
	}
	return b.settle(ctx, e, status, d), nil
}

// settle records a decision; b.mu is held.
func (b *Broker) settle(ctx context.Context, e *entry, status Status, d Decision) Approval {
	if d.At.IsZero() {
		d.At = time.Now()
	}
	d.Remember = min(max(d.Remember, 0), b.o.MaxRemember)
	e.a.Status, e.a.Decision = status, &d
	if e.timer != nil {
		e.timer.Stop()
	}
	if status == Approved && d.Remember > 0 {
		b.remember[e.a.Fingerprint] = d.At.Add(d.Remember)
	}
	if status == Approved {
		// Held for the agent's next identical call until the approval
		// expires; then it lapses, and that call asks again.
		id := e.a.ID
		e.timer = time.AfterFunc(time.Until(e.a.Expires), func() { b.lapse(id) })
	}
	if j := b.o.Journal; j != nil {
		if err := j.Decided(context.WithoutCancel(ctx), e.a); err != nil {
			b.log.Error("approval: record the decision", "approval", e.a.ID, "err", err)
		}
	}
	close(e.done)
	b.recent = append(b.recent, e.a)
	if len(b.recent) > recentMax {
		b.recent = slices.Delete(b.recent, 0, len(b.recent)-recentMax)
	}
	b.changed()
	return e.a
}

// Close denies every pending approval, by shutdown with reason
// server_shutdown, recorded through the journal as any decision is; and
// every approval asked for later is denied the same way at once. A
// process that stops gracefully calls it, so that no approval stays
// pending for a process that is gone, and no waiting call runs anything.
// It returns how many approvals it denied.
func (b *Broker) Close(ctx context.Context) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	var open []*entry
	for _, e := range b.byID {
		if e.a.Status == Pending {
			open = append(open, e)
		}
	}
	slices.SortFunc(open, func(x, y *entry) int { return x.a.Created.Compare(y.a.Created) })
	for _, e := range open {
		b.settle(ctx, e, Denied, shutdownDecision())
	}
	return len(open)
}

func shutdownDecision() Decision {
	return Decision{By: ByShutdown, Reason: ReasonShutdown}
}

// expire denies an approval nobody answered in time.
func (b *Broker) expire(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.byID[id]; e != nil && e.a.Status == Pending {
		b.settle(context.Background(), e, Expired, Decision{By: ByTimeout, Reason: "no answer before the approval expired"})
	}
}

// lapse drops an approval that was approved but that no call picked up
// before it expired: the next identical call asks again.
func (b *Broker) lapse(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.byID[id]; e != nil && !e.reported && b.byFP[e.a.Fingerprint] == e {
		delete(b.byFP, e.a.Fingerprint)
		b.changed()
	}
}

// lapsed reports whether e was approved but not picked up before it
// expired (its timer may not have run yet).
func (e *entry) lapsed(now time.Time) bool {
	return e.a.Status == Approved && !e.reported && !now.Before(e.a.Expires)
}

// Held lists the approved approvals that no call has picked up yet, oldest
// first: approved after the agent's call stopped waiting, each runs when
// the agent repeats the identical call, until it expires (Expires).
func (b *Broker) Held() []Approval {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []Approval
	for _, e := range b.byFP {
		if e.a.Status == Approved && !e.reported && e.waiters == 0 && !e.lapsed(now) {
			out = append(out, e.a)
		}
	}
	slices.SortFunc(out, func(x, y Approval) int { return x.Created.Compare(y.Created) })
	return out
}

// Get returns an approval by id.
func (b *Broker) Get(id string) (Approval, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.byID[id]
	if e == nil {
		return Approval{}, false
	}
	return e.a, true
}

// Pending lists the approvals waiting for an answer, oldest first.
func (b *Broker) Pending() []Approval {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Approval
	for _, e := range b.byID {
		if e.a.Status == Pending {
			out = append(out, e.a)
		}
	}
	slices.SortFunc(out, func(x, y Approval) int { return x.Created.Compare(y.Created) })
	return out
}

// Recent lists decided approvals, newest first.
func (b *Broker) Recent() []Approval {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.recent)
	slices.Reverse(out)
	return out
}

// Watch calls fn after every change (a request, a decision) until the
// returned function is called. fn runs with the broker locked: it must
// not block or call the broker (signal a goroutine instead).
func (b *Broker) Watch(fn func()) (stop func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.nextW
	b.nextW++
	b.watchers[id] = fn
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.watchers, id)
	}
}

// changed tells the watchers; b.mu is held.
func (b *Broker) changed() {
	for _, fn := range b.watchers {
		fn()
	}
}
