package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/shell"
)

// ErrExecJudging is wrapped by Dial's error when the shell's programs must
// be judged (Launch.JudgeExec) and the kernel cannot: the session is
// refused rather than run unjudged.
var ErrExecJudging = errors.New("exec judging unavailable")

// receiveTimeout bounds how long Dial waits for the launcher's listener.
const receiveTimeout = 10 * time.Second

// guard is the execguard filter of one sandboxed shell (its exec judging
// and unix socket checks): the launcher's socket until the listener
// arrives, then the goroutine serving it.
type guard struct {
	parent, child *os.File
	judge         shell.LaunchJudge
	sockets       execguard.SocketRules
	exits         *exitWatch // nil where execs are not judged or process events cannot be had
	cancel        context.CancelFunc
	done          chan struct{}
}

// newGuard prepares the execguard filter of a sandboxed shell: its
// connects are allowed where rules say (pathname unix sockets under its
// roots only), and
// its execs are judged with judge (nil: the filter sends none), or
// explains why the kernel cannot.
func newGuard(judge shell.LaunchJudge, rules execguard.SocketRules) (*guard, error) {
	if err := execguard.Available(); err != nil {
		if judge == nil {
			return nil, fmt.Errorf("%w: tandem checks every unix socket a local session connects to: %w", ErrExecJudging, err)
		}
		return nil, fmt.Errorf("%w: the policy's command rules must judge every program a local session starts: %w", ErrExecJudging, err)
	}
	judged := judge != nil
	if !judged {
		judge = func(context.Context, execguard.Exec, execguard.Origin) (execguard.Verdict, func(shell.ExitStatus)) {
			return execguard.Deny, nil
		}
	}
	parent, child, err := execguard.Pair()
	if err != nil {
		return nil, err
	}
	g := &guard{parent: parent, child: child, judge: judge, sockets: rules, done: make(chan struct{})}
	if judged {
		g.exits, _ = newExitWatch() // without it, exit statuses are absent
	}
	return g, nil
}

// started runs once the launcher is running: it drops tandem's copy of
// the launcher's end, receives the listener and serves it until stop. The
// launcher's exec of the shell waits for this.
func (g *guard) started(ctx context.Context, c *conn) error {
	_ = g.child.Close()
	rctx, cancel := context.WithTimeout(ctx, receiveTimeout)
	l, err := execguard.Receive(rctx, g.parent)
	cancel()
	_ = g.parent.Close()
	if err != nil {
		close(g.done)
		if g.exits != nil {
			g.exits.close()
		}
		return err
	}
	l.AllowSockets(g.sockets)
	sctx, scancel := context.WithCancel(context.Background())
	g.cancel = scancel
	go func() {
		defer close(g.done)
		_ = l.Serve(sctx, func(ctx context.Context, e execguard.Exec) execguard.Verdict {
			// Unknown (an error) is no person's: judged as the agent's.
			o, _ := execguard.Trace(e.Pid, c.pid)
			v, exited := g.judge(ctx, e, o)
			if v == execguard.Allow && exited != nil && g.exits != nil {
				if tgid, err := execguard.Tgid(e.Pid); err == nil {
					g.exits.expect(tgid, exited)
				}
			}
			return v
		})
	}()
	return nil
}

// abort releases a guard whose launcher never started.
func (g *guard) abort() {
	_ = g.child.Close()
	_ = g.parent.Close()
	if g.exits != nil {
		g.exits.close()
	}
}

// stop ends serving: execs still waiting, and any later ones, fail.
func (g *guard) stop() {
	if g.cancel != nil {
		g.cancel()
	}
	<-g.done
	if g.exits != nil {
		g.exits.close()
	}
}

var _ shell.ExitSyncer = (*conn)(nil)

// SyncExits delivers the ends of the shell's programs that the kernel has
// reported so far (see exitWatch).
func (c *conn) SyncExits() {
	if c.guard != nil && c.guard.exits != nil {
		c.guard.exits.sync()
	}
}
