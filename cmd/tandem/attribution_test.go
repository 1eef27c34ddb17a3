package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// joinPy is an agent's background job that waits until the human's
// command holds the terminal, joins its process group, and starts git push
// from there (git is its child, in the human's foreground group).
const joinPy = `import os, subprocess, sys, time
ws = sys.argv[1]
while not os.path.exists(os.path.join(ws, "hum-go")):
    time.sleep(0.01)
tty = os.open("/dev/tty", os.O_RDONLY)
while True:
    pg = os.tcgetpgrp(tty)
    if pg != os.getsid(0) and pg != os.getpgrp():
        break
    time.sleep(0.01)
os.setpgid(0, pg)
open(os.path.join(ws, "joined"), "w").write("%d %d" % (pg, os.getpgrp()))
try:
    rc = subprocess.run(["git", "push", "-q", "origin", "main:joined"]).returncode
except OSError:
    rc = 126
open(os.path.join(ws, "d1.rc"), "w").write(str(rc))
`

// threadPy is an agent's background job, a child of the shell, that
// starts git push from a thread made while the human's command runs: the
// thread is new, its process is not.
const threadPy = `import os, sys, threading, time
ws = sys.argv[1]
while not os.path.exists(os.path.join(ws, "hum-go")):
    time.sleep(0.01)
def push():
    try:
        os.execvp("git", ["git", "push", "-q", "origin", "main:thread"])
    except OSError:
        open(os.path.join(ws, "d4.rc"), "w").write("126")
        os._exit(126)
threading.Thread(target=push).start()
`

// cparentPy is an agent's background job, a child of the shell, that
// waits until the human's command runs and then forks with CLONE_PARENT:
// the new process's parent is the shell and its start falls in the human's
// command, so only the lineage filter (clone refused) keeps its git push
// the agent's.
const cparentPy = `import ctypes, os, sys, time
ws = sys.argv[1]
while not os.path.exists(os.path.join(ws, "hum-go")):
    time.sleep(0.01)
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 0x00008000 | 17, 0, 0, 0, 0)
if pid == 0:
    try:
        os.execvp("git", ["git", "push", "-q", "origin", "main:cparent"])
    except OSError:
        os._exit(126)
if pid < 0:
    open(os.path.join(ws, "d5.rc"), "w").write("clone refused %d" % ctypes.get_errno())
    sys.exit()
while os.path.exists("/proc/%d" % pid) and open("/proc/%d/stat" % pid).read().split(")")[1].split()[0] != "Z":
    time.sleep(0.01)
open(os.path.join(ws, "d5.rc"), "w").write("cloned")
`

// execRec is one program of a command_execs audit record.
type execRec struct {
	Argv     []string `json:"argv"`
	Decision string   `json:"decision"`
	ExitCode *int     `json:"exitCode"`
	Signal   string   `json:"signal"`
}

// auditedExecs lists the programs of every command_execs record of the
// session, waiting until one satisfies done (the journal writes a
// command's programs once it has ended).
func auditedExecs(t *testing.T, dataDir, session string, done func([]execRec) bool) []execRec {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var all []execRec
		for _, rec := range auditRecords(t, dataDir) {
			if rec.Event != "command_execs" || rec.SessionName != session {
				continue
			}
			var a struct {
				Execs []execRec `json:"execs"`
			}
			if err := json.Unmarshal(rec.Args, &a); err != nil {
				t.Fatal(err)
			}
			all = append(all, a.Execs...)
		}
		if done(all) || time.Now().After(deadline) {
			return all
		}
		time.Sleep(50 * time.Millisecond) // the journal writes after the command ends
	}
}

// pushTo finds the git push of the audited programs that pushes to ref.
func pushTo(execs []execRec, ref string) (execRec, bool) {
	for _, e := range execs {
		if len(e.Argv) > 1 && filepath.Base(e.Argv[0]) == "git" && slices.Contains(e.Argv, "push") && slices.Contains(e.Argv, "main:"+ref) {
			return e, true
		}
	}
	return execRec{}, false
}

// execAfterHuman runs an agent command once the human's has ended,
// retrying past session_busy while its end is on its way and past the
// gate that reports what the human did.
func execAfterHuman(t *testing.T, se sess, command string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := se.exec(t, command)
		if (r["error"] != "session_busy" && r["error"] != "user_activity_detected") || time.Now().After(deadline) {
			return mustOK(t, r)
		}
		time.Sleep(20 * time.Millisecond) // the human's command's end mark is being read
	}
}

// TestAttributionByAncestry: under a `git push *` deny rule, five
// background jobs the agent leaves behind wait until the human's command
// runs and push from there: one joins the human's foreground process
// group, one is a double-forked daemon, one runs in a session of its own
// (setsid), one pushes from a thread it starts then, one from a process it
// forks as the shell's child (CLONE_PARENT, which is refused). Each is judged as the
// agent's and refused; the human's own git push, typed in the terminal,
// is theirs and runs, and so is one their background job starts while an
// agent command runs.
func TestAttributionByAncestry(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	ws := t.TempDir()
	repo := gitPushRepo(t, ws)
	srv := startServer(t, serverOpts{config: gitPushPolicy(ws, "deny", "", "")})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "a"}))["sessionToken"])
	se := sess{srv, "a", tok}
	url := str(mustOK(t, srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": "a", "sessionToken": tok}))["monitoringUrl"])
	operator := dataDirToken(t, srv.dataDir)

	// The jobs' git push is in files the agent's line only names, so the
	// line's judge lets the line run; the push itself meets exec judging.
	waitGo := "while [ ! -e " + ws + "/hum-go ]; do sleep 0.02; done\n"
	for name, body := range map[string]string{
		"join.py":    joinPy,
		"daemon.sh":  "#!/bin/sh\n" + waitGo + "git push -q origin main:daemon\necho $? >" + ws + "/d2.rc\n",
		"setsid.sh":  "#!/bin/sh\n" + waitGo + "git push -q origin main:setsid\necho $? >" + ws + "/d3.rc\n",
		"thread.py":  threadPy,
		"cparent.py": cparentPy,
		"hbg.sh":     "#!/bin/sh\nwhile [ ! -e " + ws + "/hbg-go ]; do sleep 0.02; done\ngit push -q origin main:hbg\necho $? >" + ws + "/hbg.rc\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, se.exec(t, "cd "+repo+"; python3 "+ws+"/join.py "+ws+" >/dev/null 2>&1 & "+
		"( "+ws+"/daemon.sh >/dev/null 2>&1 & ); setsid "+ws+"/setsid.sh >/dev/null 2>&1 & "+
		"python3 "+ws+"/thread.py "+ws+" >/dev/null 2>&1 & python3 "+ws+"/cparent.py "+ws+" >/dev/null 2>&1 &"))

	// The human's command: one job that holds the terminal until every
	// background job has tried.
	typeOverWebSocket(t, url, operator, "sh -c 'touch "+ws+"/hum-go; "+
		"while [ ! -e "+ws+"/d1.rc ] || [ ! -e "+ws+"/d2.rc ] || [ ! -e "+ws+"/d3.rc ] || [ ! -e "+ws+"/d5.rc ] || { [ ! -e "+ws+"/d4.rc ] && [ ! -e "+ws+"/remote.git/refs/heads/thread ]; }; do sleep 0.02; done'; echo hum-$((6*7))\r", "hum-42")

	if b, err := os.ReadFile(filepath.Join(ws, "joined")); err != nil || len(strings.Fields(string(b))) != 2 || strings.Fields(string(b))[0] != strings.Fields(string(b))[1] {
		t.Fatalf("the job did not join the human's foreground group: %q %v", b, err)
	}
	refs, err := exec.Command("git", "-C", filepath.Join(ws, "remote.git"), "for-each-ref", "--format=%(refname)").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []struct{ ref, rc string }{{"joined", "d1.rc"}, {"daemon", "d2.rc"}, {"setsid", "d3.rc"}, {"thread", "d4.rc"}, {"cparent", "d5.rc"}} {
		rc, _ := os.ReadFile(filepath.Join(ws, job.rc))
		if strings.Contains(string(refs), "refs/heads/"+job.ref) || strings.TrimSpace(string(rc)) == "0" {
			t.Errorf("%s: the agent's git push ran as the human's command ran (status %q, remote refs %q)", job.ref, rc, refs)
		}
	}

	// The human's own push, typed in the same terminal, is theirs; so is
	// one their background job starts while an agent command runs.
	typeOverWebSocket(t, url, operator, "git push -q origin main:human; echo push=$?\r", "push=0")
	typeOverWebSocket(t, url, operator, ws+"/hbg.sh >/dev/null 2>&1 & echo bg-$((6*7))\r", "bg-42")
	r := result(t, execAfterHuman(t, se, "touch "+ws+"/hbg-go; while [ ! -e "+ws+"/hbg.rc ]; do sleep 0.02; done; cat "+ws+"/hbg.rc"))
	if strings.TrimSpace(str(r["stdout"])) != "0" {
		t.Errorf("the human's background push during the agent's command: %v", r)
	}

	execs := auditedExecs(t, srv.dataDir, "a", func(all []execRec) bool {
		_, ok := pushTo(all, "human")
		_, bg := pushTo(all, "hbg")
		return ok && bg
	})
	for _, ref := range []string{"joined", "daemon", "setsid", "thread"} {
		e, ok := pushTo(execs, ref)
		if !ok || e.Decision != "deny" {
			t.Errorf("%s: audited %+v (found %v), want decision deny", ref, e, ok)
		}
	}
	for _, ref := range []string{"human", "hbg"} {
		if e, ok := pushTo(execs, ref); !ok || e.Decision != "human" {
			t.Errorf("the human's push to %s: audited %+v (found %v), want decision human", ref, e, ok)
		}
	}
}

// TestExecExitStatus: the exec list of a command carries each program's
// exit status, or the signal that ended it; a shell builtin starts no
// program and has none.
func TestExecExitStatus(t *testing.T) {
	if err := execguard.Available(); err != nil {
		testenv.Missing(t, "%v", err)
	}
	if os.Geteuid() != 0 {
		// Process events need CAP_NET_ADMIN: the statuses are absent.
		testenv.Missing(t, "exit statuses need root (the kernel's process events)")
	}
	ws := t.TempDir()
	gitPushRepo(t, ws)
	srv := startServer(t, serverOpts{config: gitPushPolicy(ws, "deny", "", "")})
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "e"}))["sessionToken"])
	se := sess{srv, "e", tok}

	repo := filepath.Join(ws, "repo")
	r := result(t, mustOK(t, se.exec(t, "cd "+repo+"; true; false; sh -c 'exit 3'; /bin/true; /bin/false; sh -c 'kill -9 $$'; ./push.sh")))
	status, _ := r["exitCode"].(float64)
	if status == 0 {
		t.Fatalf("push.sh did not fail: %v", r)
	}
	execs := auditedExecs(t, srv.dataDir, "e", func(all []execRec) bool { return len(all) >= 6 })
	type want struct {
		code   int
		signal string
	}
	wants := []struct {
		argv []string
		want *want
	}{
		{[]string{"sh", "-c", "exit 3"}, &want{code: 3}},
		{[]string{"/bin/true"}, &want{code: 0}},
		{[]string{"/bin/false"}, &want{code: 1}},
		{[]string{"sh", "-c", "kill -9 $$"}, &want{signal: "SIGKILL"}},
		{[]string{"./push.sh"}, &want{code: int(status)}},
		{[]string{"git", "push", "-q", "origin", "main"}, nil}, // refused: it never ran
	}
	for _, w := range wants {
		i := slices.IndexFunc(execs, func(e execRec) bool { return slices.Equal(e.Argv, w.argv) })
		if i < 0 {
			t.Errorf("no exec record of %q in %+v", w.argv, execs)
			continue
		}
		e := execs[i]
		switch {
		case w.want == nil:
			if e.ExitCode != nil || e.Signal != "" {
				t.Errorf("%q: refused, but has a status %+v", w.argv, e)
			}
		case w.want.signal != "":
			if e.Signal != w.want.signal || e.ExitCode != nil {
				t.Errorf("%q: signal %q exit %v, want %s", w.argv, e.Signal, e.ExitCode, w.want.signal)
			}
		case e.ExitCode == nil || *e.ExitCode != w.want.code:
			t.Errorf("%q: exit %v, want %d", w.argv, e.ExitCode, w.want.code)
		}
	}
	for _, e := range execs {
		if len(e.Argv) > 0 && (e.Argv[0] == "true" || e.Argv[0] == "false") {
			t.Errorf("a builtin started a program: %+v", e)
		}
	}
}
