package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// self is this test binary, re-executed as the sandbox launcher.
var self string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.ArgName {
		os.Exit(sandbox.Main(os.Args[2:]))
	}
	abs, err := filepath.Abs(os.Args[0])
	if err != nil {
		panic(err)
	}
	self = abs
	os.Exit(m.Run())
}

// waitFor is how long any single expectation may take.
const waitFor = 10 * time.Second

// bash is the interactive shell every test drives.
func bash() shell.Launch {
	return shell.Launch{Command: "exec bash --norc --noprofile -i", Env: []string{"PS1=$ "}, Cols: 120, Rows: 40}
}

// term drives one shell: it collects everything the PTY prints and lets a
// test wait for output with a deadline.
type term struct {
	t    *testing.T
	conn shell.Conn
	ws   string // workspace

	mu      sync.Mutex
	out     bytes.Buffer
	seen    int   // output before this offset has been matched already
	readErr error // the error that ended reading
	eof     chan struct{}
}

// sandboxed returns Options for a fresh workspace, sandboxed, with fast
// teardown.
func sandboxed(t *testing.T) *Options {
	t.Helper()
	if err := (sandbox.Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	return &Options{Workspace: t.TempDir(), Self: self, KillGrace: 300 * time.Millisecond}
}

// startTerm dials o and starts collecting output; the shell is closed when
// the test ends.
func startTerm(t *testing.T, o *Options) *term {
	t.Helper()
	return startTermLaunch(t, o, bash())
}

// startTermLaunch is startTerm with a launch of the test's own.
func startTermLaunch(t *testing.T, o *Options, l shell.Launch) *term {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	c, err := o.Dial(ctx, l)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	tm := &term{t: t, conn: c, ws: o.Workspace, eof: make(chan struct{})}
	t.Cleanup(func() { _ = c.Close() })
	go tm.collect()
	return tm
}

func (tm *term) collect() {
	defer close(tm.eof)
	buf := make([]byte, 4096)
	for {
		n, err := tm.conn.Read(buf)
		tm.mu.Lock()
		tm.out.Write(buf[:n])
		if err != nil {
			tm.readErr = err
		}
		tm.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// send types line and Enter.
func (tm *term) send(line string) {
	tm.t.Helper()
	if _, err := tm.conn.Write([]byte(line + "\n")); err != nil {
		tm.t.Fatalf("write %q: %v", line, err)
	}
}

// expect waits until output not matched before matches pattern and
// returns the submatches.
func (tm *term) expect(pattern string) []string {
	tm.t.Helper()
	re := regexp.MustCompile(pattern)
	var m []string
	poll(tm.t, "output matching "+pattern, func() bool {
		tm.mu.Lock()
		defer tm.mu.Unlock()
		rest := tm.out.Bytes()[tm.seen:]
		loc := re.FindSubmatchIndex(rest)
		if loc == nil {
			return false
		}
		for i := 0; i < len(loc); i += 2 {
			if loc[i] >= 0 {
				m = append(m, string(rest[loc[i]:loc[i+1]]))
			} else {
				m = append(m, "")
			}
		}
		tm.seen += loc[1]
		return true
	}, tm.output)
	return m
}

// expectInt is expect for a pattern with one integer group.
func (tm *term) expectInt(pattern string) int {
	tm.t.Helper()
	n, err := strconv.Atoi(tm.expect(pattern)[1])
	if err != nil {
		tm.t.Fatal(err)
	}
	return n
}

func (tm *term) output() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// poll checks cond every few milliseconds until it holds or waitFor
// passes; on timeout it fails the test, showing what state() returns.
func poll(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; state:\n%s", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// processGone reports whether pid has exited (it may linger as a zombie
// until its new parent reaps it).
func processGone(pid int) bool {
	st, err := readStat(pid)
	return err != nil || !st.live()
}
