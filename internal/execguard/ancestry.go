package execguard

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Who started a process.
//
// A process of a sandboxed shell's tree is a person's only if it descends
// from a command the person started. Process groups and sessions cannot
// say so: any process of the shell's session may join the terminal's
// foreground group (setpgid) or leave the session (setsid). What a process
// cannot change is recorded by the kernel at fork: its parent, until that
// parent exits, and its start time (/proc/PID/stat fields 4 and 22).
//
// Trace walks from a process up to the shell through those parents and
// finds the shell's direct child the process descends from, and when the
// shell forked it. A Ledger, kept by the shell's owner, holds the spans of
// time during which the shell ran a person's command (from the Enter that
// submitted it to its end) and an agent's; the fork time then decides:
// the process is the person's only if the shell forked its ancestor within
// a person's span and within no agent's. Whatever the walk cannot follow
// (a parent that exited, a double-forked daemon, a pid reused meanwhile, a
// fork the clock cannot place) is the agent's.
//
// What it does not decide: what a person's process runs. A person's
// command that runs a function, an alias, a trap or a Makefile the agent
// wrote starts the agent's code as the person's. And it relies on every
// child of the shell being forked by the shell itself: clone(CLONE_PARENT)
// lets a child of the shell make a sibling, a child of the shell forked
// now, so the exec filter must refuse it (and clone3, whose flags it
// cannot read) for the ancestry to hold.

// Ticks is a moment as the kernel gives a process's start time in
// /proc/PID/stat (field 22): CLOCK_BOOTTIME in clock ticks, USER_HZ a
// second (sysconf(_SC_CLK_TCK); 100 on every architecture tandem builds
// for, which TestUserHZ checks).
type Ticks int64

// userHZ is USER_HZ; tickNS a tick's length in nanoseconds.
const (
	userHZ = 100
	tickNS = int64(time.Second) / userHZ
)

// maxDepth bounds the walk from a process to the shell: a deeper chain is
// not followed (and the process is the agent's).
const maxDepth = 512

// Origin is where a process of a shell's tree comes from.
type Origin struct {
	// Known says the process descends from the shell by an unbroken chain
	// of parents, each started no later than its child (the shell itself
	// included), or is the shell.
	Known bool
	// Forked is when the shell forked the process's ancestor that is its
	// direct child (the process itself if the shell is its parent). For
	// an exec by the shell itself, it is the moment of the exec.
	Forked Ticks
}

// procStat is what Trace reads of /proc/PID/stat.
type procStat struct {
	ppid  int
	start Ticks
}

// readStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may hold spaces and parentheses itself, so fields are
// counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// After ") ": state(3) ppid(4) ... starttime(22).
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseInt(string(f[19]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{ppid: ppid, start: Ticks(start)}, nil
}

// Tgid returns the process (thread group) that thread tid belongs to. A
// notification names the thread that called execve; its parent and start
// time are the process's, not the thread's (a thread started a moment ago
// in an old process is no new child of anyone).
func Tgid(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: Tgid: %w", tid, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Tgid", tid)
}

// Trace finds where thread pid (an exec notification's) comes from in the
// tree of the shell process shell. An error says the chain could not be
// read; the Origin is then unknown, like that of a process that does not
// descend from the shell.
func Trace(pid, shell int) (Origin, error) {
	tgid, err := Tgid(pid)
	if err != nil {
		return Origin{}, fmt.Errorf("trace %d: %w", pid, err)
	}
	sh, err := readStat(shell)
	if err != nil {
		return Origin{}, fmt.Errorf("trace %d: the shell: %w", pid, err)
	}
	if tgid == shell {
		return Origin{Known: true, Forked: nowTicks()}, nil
	}
	st, err := readStat(tgid)
	if err != nil {
		return Origin{}, fmt.Errorf("trace %d: %w", pid, err)
	}
	for range maxDepth {
		switch {
		case st.ppid == shell:
			if sh.start > st.start {
				return Origin{}, nil // the shell's pid is another process's
			}
			return Origin{Known: true, Forked: st.start}, nil
		case st.ppid <= 1:
			return Origin{}, nil // reparented: its parent exited
		}
		parent, err := readStat(st.ppid)
		if err != nil {
			return Origin{}, fmt.Errorf("trace %d: %w", pid, err)
		}
		if parent.start > st.start {
			return Origin{}, nil // the parent exited and its pid was reused
		}
		st = parent
	}
	return Origin{}, nil
}

// bootNS reads CLOCK_BOOTTIME in nanoseconds, the clock of Ticks.
func bootNS() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("execguard: clock_gettime(CLOCK_BOOTTIME): " + err.Error()) // Linux has had it since 2.6.39
	}
	return ts.Nano()
}

// nowTicks is the present moment in Ticks.
func nowTicks() Ticks { return Ticks(bootNS() / tickNS) }

// Owner is whom the shell runs a command for.
type Owner int8

// The owners of a span of the shell's time.
const (
	// Agent: an agent's command, from the moment tandem began typing it to
	// the moment it saw its end.
	Agent Owner = iota + 1
	// Human: a person's command, from the moment tandem received the
	// Enter that submitted it to the moment it saw its end.
	Human
)

// Span is a stretch of time during which the shell ran a command for
// Owner. To is zero for a command that still runs (it runs until now).
type Span struct {
	Owner    Owner
	From, To time.Time
}

// span is a Span on the boot clock, in nanoseconds.
type span struct {
	owner    Owner
	from, to int64
}

// MaxSpans bounds a Ledger: past it the oldest spans are forgotten, and
// processes forked in their time are the agent's.
const MaxSpans = 1024

// agentMargin widens an agent's span on both sides, for the error of
// converting Go's clock to the boot clock (microseconds).
const agentMargin = int64(time.Millisecond)

// Ledger records whom the shell ran commands for, and when, and tells
// whose a process is by when the shell forked its ancestor. Its zero value
// is empty. It is not safe for concurrent use: its owner's lock guards it.
type Ledger struct {
	spans []span
	// floor is the end of the latest span forgotten: a fork before it
	// cannot be placed.
	floor int64
}

// Add records a finished span.
func (l *Ledger) Add(s Span) {
	if len(l.spans) == MaxSpans {
		l.floor = max(l.floor, l.spans[0].to)
		l.spans = append(l.spans[:0], l.spans[1:]...)
	}
	now := bootNS()
	l.spans = append(l.spans, toBoot(s, now))
}

// toBoot converts s to the boot clock, read as now. Go's clock is
// monotonic, as CLOCK_BOOTTIME is while the machine does not suspend.
func toBoot(s Span, now int64) span {
	b := span{owner: s.Owner, from: now - int64(time.Since(s.From)), to: now}
	if !s.To.IsZero() {
		b.to = now - int64(time.Since(s.To))
	}
	return b
}

// Human reports whether a process of Origin o is a person's: the shell
// forked its ancestor within the tick of a person's span (a recorded one
// or one of running, the commands that run now) and that tick meets no
// agent's span. Everything else, an unknown origin included, is the
// agent's; a tick shared by both (a person's line typed ahead, run the
// moment the agent's command ended) is the agent's too.
func (l *Ledger) Human(o Origin, running ...Span) bool {
	if !o.Known {
		return false
	}
	from := int64(o.Forked) * tickNS
	to := from + tickNS // the fork happened in [from, to)
	if from <= l.floor {
		return false
	}
	now := bootNS()
	human := false
	meets := func(s span) bool {
		switch s.owner {
		case Agent:
			if s.from-agentMargin < to && from <= s.to+agentMargin {
				return true
			}
		case Human:
			human = human || (s.from < to && from <= s.to)
		}
		return false
	}
	for _, s := range l.spans {
		if meets(s) {
			return false
		}
	}
	for _, s := range running {
		if meets(toBoot(s, now)) {
			return false
		}
	}
	return human
}
