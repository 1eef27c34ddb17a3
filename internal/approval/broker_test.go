package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
)

type memJournal struct {
	mu        sync.Mutex
	requested []approval.Request
	decided   []approval.Approval
}

func (j *memJournal) Requested(_ context.Context, r approval.Request) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.requested = append(j.requested, r)
	return nil
}

func (j *memJournal) Decided(_ context.Context, a approval.Approval) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.decided = append(j.decided, a)
	return nil
}

var actX = approval.Action{Tenant: "t", Actor: "a", SessionID: "s1", SessionName: "dev", Target: "local", Tool: "ssh_exec", Command: "rm -rf build", Cwd: "/w"}

// decideWhenAsked answers the next pending approval as soon as it appears.
func decideWhenAsked(t *testing.T, b *approval.Broker, d approval.Decision) <-chan approval.Approval {
	t.Helper()
	out := make(chan approval.Approval, 1)
	go func() {
		for {
			if p := b.Pending(); len(p) > 0 {
				a, err := b.Decide(context.Background(), p[0].ID, d)
				if err != nil {
					t.Error(err)
				}
				out <- a
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return out
}

func TestApproveRunsOnce(t *testing.T) {
	j := &memJournal{}
	b := approval.New(approval.Options{Journal: j})
	ctx := context.Background()
	done := decideWhenAsked(t, b, approval.Decision{Approved: true, By: approval.ByDashboard})
	o, err := b.Request(ctx, actX, "rules[0]", "asks", time.Minute, nil)
	if err != nil || o.Kind != approval.Run {
		t.Fatalf("approved request: %+v %v", o, err)
	}
	<-done
	// The identical call again asks again.
	o, err = b.Request(ctx, actX, "", "", 20*time.Millisecond, nil)
	if err != nil || o.Kind != approval.Waiting {
		t.Fatalf("second identical call: %+v %v", o, err)
	}
	if len(j.requested) != 2 || len(j.decided) != 1 {
		t.Errorf("journal: %d requested, %d decided", len(j.requested), len(j.decided))
	}
}

func TestBinding(t *testing.T) {
	b := approval.New(approval.Options{})
	ctx := context.Background()
	// Pending, then approved while the agent is away; the repeat runs.
	o, _ := b.Request(ctx, actX, "", "", 10*time.Millisecond, nil)
	if o.Kind != approval.Waiting {
		t.Fatalf("first call: %+v", o)
	}
	if _, err := b.Decide(ctx, o.Approval.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
		t.Fatal(err)
	}
	// Another command, another session, another cwd: none is approved by it.
	for _, other := range []approval.Action{
		func() approval.Action { a := actX; a.Command = "rm -rf /"; return a }(),
		func() approval.Action { a := actX; a.SessionID = "s2"; return a }(),
		func() approval.Action { a := actX; a.Cwd = "/"; return a }(),
		func() approval.Action { a := actX; a.Tenant = "u"; return a }(),
	} {
		if o, _ := b.Request(ctx, other, "", "", 5*time.Millisecond, nil); o.Kind != approval.Waiting {
			t.Errorf("%+v ran on another action's approval", other)
		}
	}
	if o, _ := b.Request(ctx, actX, "", "", time.Second, nil); o.Kind != approval.Run {
		t.Fatalf("repeat after approval: %+v", o)
	}
	if _, err := b.Decide(ctx, o.Approval.ID, approval.Decision{Approved: false}); !errors.Is(err, approval.ErrDecided) {
		t.Errorf("second answer: %v, want ErrDecided", err)
	}
}

func TestRememberAndDeny(t *testing.T) {
	b := approval.New(approval.Options{MaxRemember: 50 * time.Millisecond})
	ctx := context.Background()
	decideWhenAsked(t, b, approval.Decision{Approved: true, Remember: time.Hour}) // capped to 50 ms
	if o, _ := b.Request(ctx, actX, "", "", time.Minute, nil); o.Kind != approval.Run {
		t.Fatalf("first: %+v", o)
	}
	if o, _ := b.Request(ctx, actX, "", "", time.Millisecond, nil); o.Kind != approval.Run || !o.Remembered {
		t.Fatalf("remembered: %+v", o)
	}
	other := actX
	other.SessionID = "s2"
	if o, _ := b.Request(ctx, other, "", "", time.Millisecond, nil); o.Kind != approval.Waiting {
		t.Fatalf("remember reached another session: %+v", o)
	}
	time.Sleep(60 * time.Millisecond) // past the capped remember window
	if o, _ := b.Request(ctx, actX, "", "", time.Millisecond, nil); o.Kind == approval.Run {
		t.Fatalf("remember outlived its minutes: %+v", o)
	}

	b2 := approval.New(approval.Options{})
	decideWhenAsked(t, b2, approval.Decision{Approved: false, Reason: "not today", Remember: time.Hour})
	o, _ := b2.Request(ctx, actX, "", "", time.Minute, nil)
	if o.Kind != approval.Refused || o.Approval.Decision.Reason != "not today" {
		t.Fatalf("denied: %+v", o)
	}
}

func TestTimeoutDenies(t *testing.T) {
	j := &memJournal{}
	b := approval.New(approval.Options{Timeout: 30 * time.Millisecond, Journal: j})
	o, err := b.Request(context.Background(), actX, "", "", time.Second, nil)
	if err != nil || o.Kind != approval.TimedOut || o.Approval.Decision.By != approval.ByTimeout {
		t.Fatalf("timeout: %+v %v", o, err)
	}
	if len(j.decided) != 1 || j.decided[0].Status != approval.Expired {
		t.Errorf("journal: %+v", j.decided)
	}
}

func TestFingerprintBindsEveryField(t *testing.T) {
	base := approval.Fingerprint(actX)
	for name, change := range map[string]func(*approval.Action){
		"session": func(a *approval.Action) { a.SessionID += "x" },
		"tenant":  func(a *approval.Action) { a.Tenant += "x" },
		"target":  func(a *approval.Action) { a.Target += "x" },
		"tool":    func(a *approval.Action) { a.Tool += "x" },
		"command": func(a *approval.Action) { a.Command += "x" },
		"cwd":     func(a *approval.Action) { a.Cwd += "x" },
	} {
		a := actX
		change(&a)
		if approval.Fingerprint(a) == base {
			t.Errorf("changing the %s kept the fingerprint", name)
		}
	}
	a := actX
	a.Command = "  " + a.Command + "\n"
	if approval.Fingerprint(a) != base {
		t.Error("blank space around the command changed the fingerprint")
	}
}

// TestDecisionJSON: remember travels in milliseconds, as its name says.
func TestDecisionJSON(t *testing.T) {
	b, err := json.Marshal(approval.Decision{Approved: true, By: approval.ByDashboard, Remember: 15 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["rememberMs"] != float64(900000) || got["approved"] != true || got["by"] != "dashboard" {
		t.Fatalf("decision JSON: %s", b)
	}
	var back approval.Decision
	if err := json.Unmarshal(b, &back); err != nil || back.Remember != 15*time.Minute || !back.Approved {
		t.Fatalf("decision back from JSON: %+v %v", back, err)
	}
}

// TestCloseDeniesPending: Close denies every pending approval (the waiting
// call is refused, the journal records the decision), and every approval
// asked for later at once.
func TestCloseDeniesPending(t *testing.T) {
	j := &memJournal{}
	b := approval.New(approval.Options{Journal: j, Wait: time.Minute})
	ctx := context.Background()
	waiting := make(chan approval.Outcome, 2)
	for _, cmd := range []string{"rm a", "rm b"} {
		act := actX
		act.Command = cmd
		go func() {
			out, err := b.Request(ctx, act, "r", "", 0, nil)
			if err != nil {
				t.Error(err)
			}
			waiting <- out
		}()
	}
	for len(b.Pending()) < 2 {
		time.Sleep(time.Millisecond)
	}
	if n := b.Close(ctx); n != 2 {
		t.Errorf("Close denied %d, want 2", n)
	}
	for range 2 {
		out := <-waiting
		if out.Kind != approval.Refused || out.Approval.Status != approval.Denied ||
			out.Approval.Decision.By != approval.ByShutdown || out.Approval.Decision.Reason != approval.ReasonShutdown {
			t.Errorf("a waiting call after Close: %+v", out)
		}
	}
	// Asked after Close: denied at once, recorded too.
	out, err := b.Request(ctx, actX, "r", "", 0, nil)
	if err != nil || out.Kind != approval.Refused || out.Approval.Decision.Reason != approval.ReasonShutdown {
		t.Fatalf("a request after Close: %+v %v", out, err)
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("pending after Close: %+v", p)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.requested) != 3 || len(j.decided) != 3 {
		t.Errorf("journal: %d requested, %d decided; want 3 and 3", len(j.requested), len(j.decided))
	}
	for _, a := range j.decided {
		if a.Status != approval.Denied || a.Decision.By != approval.ByShutdown {
			t.Errorf("journaled decision: %+v", a)
		}
	}
	if n := b.Close(ctx); n != 0 {
		t.Errorf("a second Close denied %d", n)
	}
}

// TestHeldUntilExpiry: an approval decided after the agent's call stopped
// waiting is held for the agent's next identical call, which runs it; one
// that no call picks up before it expires lapses, and the identical call
// asks again. Held lists what is held, and watchers hear of each change.
func TestHeldUntilExpiry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		pickUp   bool
		wantKind approval.Kind
	}{
		{"picked up by the next call", time.Minute, true, approval.Run},
		{"lapses at its expiry", 300 * time.Millisecond, false, approval.Waiting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := approval.New(approval.Options{Timeout: tc.timeout})
			changes := make(chan struct{}, 100)
			defer b.Watch(func() { changes <- struct{}{} })()
			ctx := context.Background()
			o, err := b.Request(ctx, actX, "", "", 10*time.Millisecond, nil)
			if err != nil || o.Kind != approval.Waiting {
				t.Fatalf("first call: %+v %v", o, err)
			}
			if _, err := b.Decide(ctx, o.Approval.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
				t.Fatal(err)
			}
			held := b.Held()
			if len(held) != 1 || held[0].ID != o.Approval.ID || !held[0].Expires.Equal(o.Approval.Expires) {
				t.Fatalf("held after the approval: %+v", held)
			}
			if !tc.pickUp {
				// Wait for the lapse, as a watcher hears of it.
				deadline := time.After(10 * time.Second)
				for len(b.Held()) > 0 {
					select {
					case <-changes:
					case <-deadline:
						t.Fatal("the held approval never lapsed")
					}
				}
			}
			again, err := b.Request(ctx, actX, "", "", 10*time.Millisecond, nil)
			if err != nil || again.Kind != tc.wantKind {
				t.Fatalf("the identical call after the approval: %+v %v; want kind %v", again, err, tc.wantKind)
			}
			if tc.pickUp && again.Approval.ID != o.Approval.ID {
				t.Errorf("the call ran approval %s, want %s", again.Approval.ID, o.Approval.ID)
			}
			if !tc.pickUp && again.Approval.ID == o.Approval.ID {
				t.Errorf("the lapsed approval %s was reused", o.Approval.ID)
			}
			if h := b.Held(); len(h) != 0 {
				t.Errorf("still held: %+v", h)
			}
		})
	}
}

// TestWaitingCallNotHeld: an approval that a call is waiting on is never
// listed as held for a later call, not even between the decision and the
// waiting call's pick-up: the waiting call runs it.
func TestWaitingCallNotHeld(t *testing.T) {
	b := approval.New(approval.Options{})
	res := make(chan approval.Outcome, 1)
	go func() {
		o, _ := b.Request(context.Background(), actX, "", "", time.Minute, nil)
		res <- o
	}()
	var p []approval.Approval
	for deadline := time.Now().Add(10 * time.Second); len(p) == 0; p = b.Pending() {
		if time.Now().After(deadline) {
			t.Fatal("the call never asked")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Decide(context.Background(), p[0].ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
		t.Fatal(err)
	}
	if h := b.Held(); len(h) != 0 { // at once: the waiting call may not have picked it up yet
		t.Errorf("listed as held while a call waits on it: %+v", h)
	}
	if o := <-res; o.Kind != approval.Run {
		t.Errorf("the waiting call: %+v", o)
	}
	if h := b.Held(); len(h) != 0 {
		t.Errorf("held after the waiting call ran it: %+v", h)
	}
}
