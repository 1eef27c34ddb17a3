package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

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
	if judge == nil {
		judge = func(context.Context, execguard.Exec, bool) execguard.Verdict { return execguard.Deny }
	}
	parent, child, err := execguard.Pair()
	if err != nil {
		return nil, err
	}
	return &guard{parent: parent, child: child, judge: judge, sockets: rules, done: make(chan struct{})}, nil
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
		return err
	}
	l.AllowSockets(g.sockets)
	sctx, scancel := context.WithCancel(context.Background())
	g.cancel = scancel
	go func() {
		defer close(g.done)
		_ = l.Serve(sctx, func(ctx context.Context, e execguard.Exec) execguard.Verdict {
			return g.judge(ctx, e, c.foreground(e.Pid))
		})
	}()
	return nil
}

// abort releases a guard whose launcher never started.
func (g *guard) abort() {
	_ = g.child.Close()
	_ = g.parent.Close()
}

// stop ends serving: execs still waiting, and any later ones, fail.
func (g *guard) stop() {
	if g.cancel != nil {
		g.cancel()
	}
	<-g.done
}

// foreground reports whether pid belongs to the job a person at the
// terminal runs: its process group holds the terminal and is not the
// shell's own (the shell's group holds it at the prompt and while a
// builtin runs; a job that `set +m` left there is not the person's).
//
// bash puts a new job in its own process group before it hands it the
// terminal, and the program may exec in between: while the terminal is
// still the shell's own, a program in a job of its own is given a moment
// (handOver) to be handed it, so that a person's command on a busy
// machine is not taken for a background job.
func (c *conn) foreground(pid int) bool {
	st, err := readStat(pid)
	if err != nil || st.sid != c.pid || st.pgrp == c.pid {
		return false
	}
	for deadline := time.Now().Add(handOver); ; time.Sleep(5 * time.Millisecond) {
		var pgrp int
		err = c.control(func(fd int) (err error) {
			pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
			return err
		})
		switch {
		case err != nil:
			return false
		case pgrp == st.pgrp:
			return true
		case pgrp != c.pid || time.Now().After(deadline):
			return false // another job holds the terminal, or none hands it over
		}
	}
}

// handOver bounds the wait for bash to hand a new job the terminal.
const handOver = 300 * time.Millisecond
