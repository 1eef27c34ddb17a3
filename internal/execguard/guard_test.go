package execguard_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
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

// log is a Judge that records what it saw and denies any rm, whatever it
// is called.
type log struct {
	mu    sync.Mutex
	execs []execguard.Exec
	deny  func(e execguard.Exec) bool
}

func (l *log) judge(_ context.Context, e execguard.Exec) execguard.Verdict {
	l.mu.Lock()
	l.execs = append(l.execs, e)
	l.mu.Unlock()
	if l.deny != nil && l.deny(e) {
		return execguard.Deny
	}
	return execguard.Allow
}

func (l *log) seen() []execguard.Exec {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.execs)
}

func isRm(e execguard.Exec) bool {
	return filepath.Base(e.Path) == "rm" || (len(e.Argv) > 0 && filepath.Base(e.Argv[0]) == "rm")
}

// guarded is one run of a bash script in the sandbox, under the exec
// filter.
type guarded struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	parent *os.File
	allow  execguard.SocketRules
}

// start starts bash -c script in the sandbox with workspace ws, its execs
// sent to tandem's end of the pair (returned, not yet received).
func start(t *testing.T, ws, script string, stdin *os.File) *guarded {
	t.Helper()
	return startWith(t, ws, script, stdin, nil)
}

// startWith is start with the policy changed by edit first (unless nil).
func startWith(t *testing.T, ws, script string, stdin *os.File, edit func(*sandbox.Policy)) *guarded {
	t.Helper()
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if err := (sandbox.Policy{}).Supported(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	parent, child, err := execguard.Pair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Close() })
	p := sandbox.Policy{ReadWrite: []string{ws}, ReadOnly: sandbox.DefaultReadOnly(), ExecFD: 3}
	if edit != nil {
		edit(&p)
	}
	cmd, err := sandbox.Command(self, p, []string{"/bin/bash", "-c", script})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles = ws, &out, &out, []*os.File{child}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + ws, "LC_ALL=C"}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = child.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &guarded{cmd: cmd, out: &out, parent: parent}
}

// serve receives the listener and serves it with judge until the test ends.
func (g *guarded) serve(t *testing.T, judge execguard.Judge) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	l, err := execguard.Receive(ctx, g.parent)
	cancel()
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	l.AllowSockets(g.allow)
	sctx, scancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Serve(sctx, judge) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			scancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitExe waits until the launcher has become the program exe.
func (g *guarded) waitExe(t *testing.T, exe string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ := os.Readlink("/proc/" + strconv.Itoa(g.cmd.Process.Pid) + "/exe")
		if got == exe {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the launcher is %q, not %s", got, exe)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the script to end and returns its output and exit code.
func (g *guarded) wait(t *testing.T) (string, int) {
	t.Helper()
	waitErr := make(chan error, 1)
	go func() { waitErr <- g.cmd.Wait() }()
	select {
	case <-waitErr:
	case <-time.After(20 * time.Second):
		t.Fatalf("the script did not end; output so far:\n%s", g.out)
	}
	return g.out.String(), g.cmd.ProcessState.ExitCode()
}

// TestDenyStopsEveryRoute runs rm in each of the ways the issue lists (and
// a few more); each is stopped at exec, whatever led to it.
func TestDenyStopsEveryRoute(t *testing.T) {
	tests := []struct {
		name   string
		files  map[string]string
		script string
	}{
		{name: "direct", script: "rm victim"},
		{name: "absolute path", script: "/usr/bin/rm victim"},
		{name: "script", files: map[string]string{"s.sh": "#!/bin/sh\nrm victim\n"}, script: "chmod +x s.sh && ./s.sh"},
		{name: "alias", script: "shopt -s expand_aliases\nalias ls=rm\nls victim"},
		{name: "function", script: "f() { rm \"$@\"; }; f victim"},
		{name: "hash -p", script: "hash -p /bin/rm ls; ls victim"},
		{name: "env wrapper", script: "env rm victim"},
		{name: "exec -a renames argv[0]", script: "(exec -a ls rm victim)"},
		{name: "python subprocess", script: `/usr/bin/python3 -c 'import subprocess; subprocess.run(["rm","victim"])'`},
		{name: "python fexecve (execveat)", script: `/usr/bin/python3 -c 'import os; fd=os.open("/usr/bin/rm", os.O_RDONLY); os.execve(fd, ["x","victim"], {})'`},
		{name: "makefile recipe", files: map[string]string{"Makefile": "all:\n\trm victim\n"}, script: "make"},
		{name: "xargs", script: "echo victim | xargs rm"},
		{name: "find -exec", script: "find . -name victim -exec rm {} +"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			files := map[string]string{"victim": "precious\n"}
			for k, v := range tt.files {
				files[k] = v
			}
			for name, body := range files {
				if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l := &log{deny: isRm}
			g := start(t, ws, tt.script, nil)
			g.serve(t, l.judge)
			out, _ := g.wait(t)
			if _, err := os.Stat(filepath.Join(ws, "victim")); err != nil {
				t.Fatalf("victim is gone (%v); output:\n%s", err, out)
			}
			if !strings.Contains(out, "Operation not permitted") && !strings.Contains(out, "PermissionError") {
				t.Errorf("output does not say the exec was refused:\n%s", out)
			}
			var denied []execguard.Exec
			for _, e := range l.seen() {
				if isRm(e) {
					denied = append(denied, e)
				}
			}
			if len(denied) == 0 {
				t.Fatalf("the judge never saw rm; it saw %+v", l.seen())
			}
			for _, e := range denied {
				if !slices.Contains(e.Argv, "victim") && !slices.Contains(e.Argv, "./victim") {
					t.Errorf("denied exec %+v does not name the victim", e)
				}
				if e.Cwd != ws || !filepath.IsAbs(e.Path) || e.Pid <= 0 {
					t.Errorf("denied exec %+v: want cwd %s, an absolute path and a pid", e, ws)
				}
			}
		})
	}
}

// TestAllowRuns checks the allow path: programs run, and the judge sees
// each one with its real path and argv, the launcher's own exec of the
// shell first.
func TestAllowRuns(t *testing.T) {
	ws := t.TempDir()
	l := &log{}
	g := start(t, ws, "mkdir sub && cd sub && echo hello > f && /bin/cat f", nil)
	g.serve(t, l.judge)
	out, code := g.wait(t)
	if code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("exit %d, output %q", code, out)
	}
	seen := l.seen()
	if len(seen) != 3 {
		t.Fatalf("saw %d execs, want bash, mkdir, cat: %+v", len(seen), seen)
	}
	want := []struct {
		path string
		argv []string
		cwd  string
	}{
		{"/bin/bash", []string{"/bin/bash", "-c", "mkdir sub && cd sub && echo hello > f && /bin/cat f"}, ws},
		{"/usr/bin/mkdir", []string{"mkdir", "sub"}, ws},
		{"/bin/cat", []string{"/bin/cat", "f"}, filepath.Join(ws, "sub")},
	}
	for i, w := range want {
		e := seen[i]
		if e.Path != w.path || !slices.Equal(e.Argv, w.argv) || e.Cwd != w.cwd || e.Truncated {
			t.Errorf("exec %d = %+v, want path %s argv %q cwd %s", i, e, w.path, w.argv, w.cwd)
		}
	}
}

// TestArgvBounds: a program with more arguments than MaxArgs is read up to
// the bound and marked truncated; the bytes bound holds too.
func TestArgvBounds(t *testing.T) {
	tests := []struct {
		name   string
		script string
		check  func(e execguard.Exec) bool
	}{
		{"many words", "/bin/true $(seq 1 5000)", func(e execguard.Exec) bool {
			return e.Truncated && len(e.Argv) == execguard.MaxArgs && e.Argv[1] == "1"
		}},
		{"long words", `a=$(head -c 100000 /dev/zero | tr '\0' x); /bin/true "$a" "$a" "$a"`, func(e execguard.Exec) bool {
			n := 0
			for _, a := range e.Argv {
				n += len(a) + 1
			}
			return e.Truncated && n <= execguard.MaxArgBytes+1 && len(e.Argv) == 4 && len(e.Argv[3]) < len(e.Argv[2])
		}},
		{"fits", "/bin/true a b", func(e execguard.Exec) bool {
			return !e.Truncated && slices.Equal(e.Argv, []string{"/bin/true", "a", "b"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &log{}
			g := start(t, t.TempDir(), tt.script, nil)
			g.serve(t, l.judge)
			out, code := g.wait(t)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, out)
			}
			var got *execguard.Exec
			for _, e := range l.seen() {
				if e.Path == "/bin/true" {
					got = &e
				}
			}
			if got == nil || !tt.check(*got) {
				if got != nil {
					t.Fatalf("exec of /bin/true: %d words, truncated %v", len(got.Argv), got.Truncated)
				}
				t.Fatal("the judge never saw /bin/true")
			}
		})
	}
}

// TestFailsClosed: once tandem's end is gone, execs fail; they never run
// unjudged.
func TestFailsClosed(t *testing.T) {
	t.Run("listener never received", func(t *testing.T) {
		ws := t.TempDir()
		g := start(t, ws, "touch ran", nil)
		_ = g.parent.Close() // tandem never took the listener
		out, code := g.wait(t)
		if code == 0 {
			t.Fatalf("the launcher exec'd the shell unjudged: %s", out)
		}
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Fatal("touch ran unjudged")
		}
	})
	t.Run("serving stops while the shell runs", func(t *testing.T) {
		ws := t.TempDir()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
		g := start(t, ws, "read -r line; /usr/bin/touch ran; echo rc=$?", r)
		_ = r.Close()
		stop := g.serve(t, (&log{}).judge)
		g.waitExe(t, "/usr/bin/bash")
		stop()
		if _, err := w.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
		out, _ := g.wait(t)
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Fatalf("touch ran after tandem stopped judging: %s", out)
		}
		if !strings.Contains(out, "rc=126") {
			t.Errorf("want the exec to fail (rc=126), got %q", out)
		}
	})
	t.Run("judge waits past the end of serving", func(t *testing.T) {
		ws := t.TempDir()
		held := make(chan struct{})
		judge := func(ctx context.Context, e execguard.Exec) execguard.Verdict {
			if filepath.Base(e.Path) != "touch" {
				return execguard.Allow
			}
			close(held)
			<-ctx.Done()
			return execguard.Allow // too late: Serve's context has ended
		}
		g := start(t, ws, "/usr/bin/touch ran; echo rc=$?", nil)
		stop := g.serve(t, judge)
		<-held
		stop()
		out, _ := g.wait(t)
		if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
			t.Fatalf("touch ran: %s", out)
		}
	})
}

// TestJudgeLearnsProcessGone: a judge waiting for a human learns, through
// its context, that the process it judges was killed meanwhile.
func TestJudgeLearnsProcessGone(t *testing.T) {
	held := make(chan int, 1)
	ended := make(chan struct{})
	judge := func(ctx context.Context, e execguard.Exec) execguard.Verdict {
		if filepath.Base(e.Path) != "touch" {
			return execguard.Allow
		}
		held <- e.Pid
		<-ctx.Done()
		close(ended)
		return execguard.Allow
	}
	ws := t.TempDir()
	g := start(t, ws, "/usr/bin/touch ran; echo rc=$?", nil)
	g.serve(t, judge)
	pid := <-held
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the judge was not told that its process was killed")
	}
	out, _ := g.wait(t)
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatalf("touch ran: %s", out)
	}
}

// TestNoNestedListener: a program in the tree cannot install a seccomp
// filter with a listener of its own, which would take the exec
// notifications before tandem and could let them continue; a filter
// without a listener still installs.
func TestNoNestedListener(t *testing.T) {
	const py = `
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(38, 1, 0, 0, 0)
buf = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0x7fff0000))
class P(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
p = P(1, ctypes.addressof(buf))
r = libc.syscall(317, 1, 8, ctypes.byref(p))
print("listener", r, ctypes.get_errno())
r = libc.syscall(317, 1, 0, ctypes.byref(p))
print("plain", r)
`
	if runtime.GOARCH != "amd64" {
		t.Skip("the script uses x86_64 syscall numbers") // nothing else is built in CI
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "nest.py"), []byte(py), 0o644); err != nil {
		t.Fatal(err)
	}
	g := start(t, ws, "/usr/bin/python3 nest.py", nil)
	g.serve(t, (&log{}).judge)
	out, code := g.wait(t)
	if code != 0 || !strings.Contains(out, "listener -1 1\n") || !strings.Contains(out, "plain 0\n") {
		t.Fatalf("want the listener refused with EPERM and the plain filter installed; exit %d:\n%s", code, out)
	}
}

func TestAvailableHere(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil || !strings.Contains(string(b), "user_notif") {
		testenv.Missing(t, "seccomp user notification (%v)", err)
	}
	if err := execguard.Available(); err != nil {
		t.Fatalf("Available() = %v on a kernel that lists user_notif", err)
	}
}

// TestLookSeesTheProcess: a judge that asks Exec.Look learns the program
// the kernel will run as the sandboxed process names it: rm opened on its
// descriptor 9 and run as /dev/fd/9 or /proc/self/fd/9, through a symlink
// to that, or by fexecve, is rm, whatever tandem's own descriptor 9 is;
// the existence check (a PATH search) is made in the process's view too,
// so those execs reach the judge and are refused with EPERM.
func TestLookSeesTheProcess(t *testing.T) {
	rm, err := filepath.EvalSymlinks("/usr/bin/rm")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, script string }{
		{"/dev/fd/9", "exec 9</usr/bin/rm; /dev/fd/9 victim"},
		{"/proc/self/fd/9", "exec 9</usr/bin/rm; /proc/self/fd/9 victim"},
		{"/proc/thread-self/fd/9", "exec 9</usr/bin/rm; /proc/thread-self/fd/9 victim"},
		{"a symlink x to /proc/self/fd/9", "ln -s /proc/self/fd/9 x; exec 9</usr/bin/rm; ./x victim"},
		{"fexecve", `/usr/bin/python3 -c 'import os; fd=os.open("/usr/bin/rm", os.O_RDONLY); os.execve(fd, ["x","victim"], {})'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "victim"), []byte("precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var looked []string
			judge := func(_ context.Context, e execguard.Exec) execguard.Verdict {
				r, _, err := e.Look(e.Path)
				mu.Lock()
				looked = append(looked, r)
				mu.Unlock()
				if err != nil || r == rm {
					return execguard.Deny
				}
				return execguard.Allow
			}
			g := start(t, ws, tt.script, nil)
			g.serve(t, judge)
			out, _ := g.wait(t)
			if _, err := os.Stat(filepath.Join(ws, "victim")); err != nil {
				t.Fatalf("victim is gone (%v); output:\n%s", err, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Contains(looked, rm) || !strings.Contains(out, "Operation not permitted") {
				t.Errorf("the judge looked at %q (want %s among them); output:\n%s", looked, rm, out)
			}
		})
	}
}

// TestLineageGuarded: under exec judging no program of the tree can fork
// as its parent's sibling (clone with CLONE_PARENT, or clone3 whose flags
// the filter cannot read), attach to another process of the tree (ptrace
// ATTACH or SEIZE) or write its memory (process_vm_writev, /proc/PID/mem):
// the parent chain that says whose a program is stays the kernel's. A plain
// fork, a thread, and a tracer starting its own tracee still work.
func TestLineageGuarded(t *testing.T) {
	const py = `
import ctypes, errno, os, signal, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
res = {}
def call(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    e = ctypes.get_errno()
    if r == 0:
        os._exit(0)  # a clone that succeeded: the child leaves at once
    if r > 0:
        try:
            os.waitpid(r, 0)  # with CLONE_PARENT it is not ours to wait for
        except ChildProcessError:
            pass
        res[name] = "ok"
    else:
        res[name] = errno.errorcode.get(e, str(e))
SIGCHLD = 17
call("clone CLONE_PARENT", 56, 0x8000 | SIGCHLD, 0, 0, 0, 0)
call("clone3", 435, 0, 0)
ppid = os.getppid()
call("ptrace attach", 101, 16, ppid, 0, 0)
call("ptrace seize", 101, 0x4206, ppid, 0, 0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
iov = iovec(ctypes.addressof(buf), 8)
r = libc.process_vm_writev(ppid, ctypes.byref(iov), 1, ctypes.byref(iov), 1, 0)
res["process_vm_writev"] = "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
try:
    os.open("/proc/%d/mem" % ppid, os.O_WRONLY)
    res["write /proc/PID/mem"] = "ok"
except OSError as e:
    res["write /proc/PID/mem"] = errno.errorcode.get(e.errno, str(e.errno))
pid = os.fork()
if pid == 0:
    os._exit(7)
res["fork"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7 else "bad"
th = threading.Thread(target=lambda: None); th.start(); th.join()
res["thread"] = "ok"
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, 0, 0)  # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(5)
os.waitpid(pid, 0)
libc.ptrace(7, pid, 0, 0)  # PTRACE_CONT
res["traceme"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 5 else "bad"
for k in sorted(res):
    print("%s=%s" % (k, res[k]))
`
	if runtime.GOARCH != "amd64" {
		t.Skip("the script uses x86_64 syscall numbers") // nothing else is built in CI
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "lineage.py"), []byte(py), 0o644); err != nil {
		t.Fatal(err)
	}
	g := start(t, ws, "/usr/bin/python3 lineage.py", nil)
	g.serve(t, (&log{}).judge)
	out, code := g.wait(t)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"clone CLONE_PARENT=EPERM", "clone3=ENOSYS", "ptrace attach=EPERM", "ptrace seize=EPERM",
		"process_vm_writev=EPERM", "write /proc/PID/mem=EACCES", "fork=ok", "thread=ok", "traceme=ok",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("want %s; got:\n%s", want, out)
		}
	}
}
