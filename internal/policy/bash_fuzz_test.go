package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

// bashPrelude sets up the bash that a line runs in for
// FuzzParserAgreesWithBash. A DEBUG trap, inherited by functions and
// subshells (set -T), logs the text of every simple command to fd 3. PATH
// is an empty directory, so every program the line starts is not found
// and command_not_found_handle logs its name instead: nothing outside
// bash runs. Builtins that act outside the shell (kill, history, fc) are
// disabled, FUNCNEST and ulimits bound recursion, memory, CPU and the log,
// and the shell is restricted (set -r: no redirections that write, no cd,
// no command names with a slash, no enable) before the line runs through
// eval.
const bashPrelude = `__l=$1; set --
command_not_found_handle() { printf '%s\0P%s\0' "$__nonce" "$1" >&3; return 127; }
ulimit -v 1048576 -t 1 -f 4096 2>/dev/null
enable -n kill history fc
declare -r FUNCNEST=6 __nonce
set -rT
trap '[[ ${FUNCNAME[0]-} == command_not_found_handle ]] || printf "%s\0D%s\0" "$__nonce" "$BASH_COMMAND" >&3' DEBUG
eval "$__l"`

// bashRan runs line in a real, restricted bash in dir and returns the
// names of the programs it tried to start, and of the simple commands
// (builtins and functions too) that its DEBUG trap saw. ok is false when
// the line may do something outside bash this harness does not contain (a
// background job, a /dev path), so it is not run.
func bashRan(t *testing.T, bash, dir, line string) (names []string, ok bool) {
	if len(line) > 1024 || strings.Contains(line, "/dev/") || strings.Contains(line, "&") && !onlyAndLists(line) {
		return nil, false
	}
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		t.Fatal(err)
	}
	nonce := "N" + hex.EncodeToString(nb[:])
	log, err := os.CreateTemp(dir, "log")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(log.Name())
	defer log.Close()
	empty := filepath.Join(dir, "path")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--norc", "--noprofile", "-c", bashPrelude, "bash", line)
	cmd.Dir = filepath.Join(dir, "cwd")
	cmd.Env = []string{"PATH=" + empty, "HOME=" + cmd.Dir, "LC_ALL=C", "__nonce=" + nonce}
	cmd.ExtraFiles = []*os.File{log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the line left in its group
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	out, err := os.ReadFile(log.Name())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range bytes.Split(out, []byte(nonce+"\x00")) {
		body, _, found := bytes.Cut(rec, []byte{0})
		if !found || len(body) == 0 {
			continue
		}
		switch body[0] {
		case 'P': // a program bash looked for
			names = append(names, string(body[1:]))
		case 'D': // a command's text, as the DEBUG trap saw it
			if bytes.IndexByte(body, 1) >= 0 {
				continue // bash's own quoting (CTLESC) shows through $BASH_COMMAND
			}
			if name, ok := commandName(string(body[1:])); ok && name != "eval" {
				names = append(names, name)
			}
		}
	}
	return names, true
}

// commandName returns the command word of a simple command's text
// ($BASH_COMMAND), when it is one literal simple command.
func commandName(text string) (string, bool) {
	f, err := newParser().Parse(strings.NewReader(text), "")
	if err != nil || len(f.Stmts) != 1 {
		return "", false
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return "", false
	}
	w := wordOf(call.Args[0], text)
	return w.s, w.lit
}

// onlyAndLists reports whether every '&' in line is part of '&&', so the
// line starts no background job.
func onlyAndLists(line string) bool {
	return !strings.Contains(strings.ReplaceAll(line, "&&", ""), "&")
}

// parserNames returns the command names the policy's parser finds in
// line, wrappers included, as written and as base names.
func parserNames(line string) map[string]bool {
	c := collector{parser: newParser()}
	names := map[string]bool{}
	if err := c.script(line, 0); err != nil {
		return names
	}
	for _, it := range c.items {
		if len(it.argv) > 0 && it.argv[0].lit {
			names[it.argv[0].s] = true
			names[path.Base(it.argv[0].s)] = true
		}
	}
	return names
}

// FuzzParserAgreesWithBash runs each line the policy would allow (mode
// allow, no rules: only what cannot be judged asks) in a real bash, and
// checks that every simple command bash ran, and every program it tried
// to start, is a command the parser saw. A line the parser fails closed on is not run: asking is already
// the right answer for it.
func FuzzParserAgreesWithBash(f *testing.F) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		f.Fatal("bash is needed: ", err)
	}
	for _, e := range loadCorpus(f) {
		f.Add(e.line)
	}
	for _, l := range append(append(benignLines, benignAnywhere...), fuzzSeeds...) {
		f.Add(l)
	}
	for _, l := range []string{
		"a='x[$(touch pwn)]'; echo $((a))",
		"x='a[$(touch pwn)]'; : ${!x}",
		"declare -i x; x='y[$(touch pwn)]'",
		"f() { touch pwn; }; f",
		"echo $(touch pwn) `touch pwn2` <(touch pwn3)",
		"case x in x) touch pwn;; esac",
		"[[ $(touch pwn) ]]",
		"x=$(touch pwn) echo",
		"for i in 1; do touch pwn; done",
		"echo ${x:-$(touch pwn)}",
		"coproc touch pwn",
		"printf -v x '%s' y; echo $x",
	} {
		f.Add(l)
	}
	p, err := Compile("allow", nil)
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	for _, d := range []string{"path", "cwd"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsRune(line, 0) {
			return
		}
		v := p.Decide(Input{Tool: "ssh_exec", Command: line, HasCommand: true})
		if v.Decision != Allow {
			return // failed closed: bash is not asked
		}
		ran, ok := bashRan(t, bash, dir, line)
		if !ok {
			return
		}
		seen := parserNames(line)
		if seen["command_not_found_handle"] {
			return // the line calls the harness's logger itself
		}
		for _, name := range ran {
			if !seen[name] {
				t.Fatalf("bash ran %q, which the parser did not see, in %q (parser saw %v; verdict %v: %s)",
					name, line, v.Commands, v.Decision, v.Reason)
			}
		}
	})
}

// TestBashHarnessSeesHiddenCommands: the fuzz harness's bash reports the
// programs a line starts, including those the parser cannot see, and runs
// none of them.
func TestBashHarnessSeesHiddenCommands(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed: ", err)
	}
	dir := t.TempDir()
	for _, d := range []string{"path", "cwd"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		line string
		want []string
	}{
		{"touch a; git status", []string{"touch", "touch", "git", "git"}},
		{"a='x[$(touch pwn)]'; echo $((a))", []string{"echo", "touch", "touch"}},
		{"x='a[$(touch pwn)]'; : ${!x}", []string{":", "touch", "touch"}},
		{"echo hi > out", []string{"echo"}},        // restricted: no write
		{"/bin/touch pwn", []string{"/bin/touch"}}, // restricted: no slash in a command name, so it does not run
		{"kill -0 1", []string{"kill", "kill"}},
		{"f() { printf x; }; f", []string{"f", "f", "printf"}},
	}
	for _, tc := range tests {
		got, ok := bashRan(t, bash, dir, tc.line)
		if !ok || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%q: ran %q (run %v), want %q", tc.line, got, ok, tc.want)
		}
	}
	// What the fuzz target is for: the parser does not see the touch
	// that arithmetic and indirection run, so only failing closed keeps
	// these lines from being allowed.
	for _, l := range []string{"a='x[$(touch pwn)]'; echo $((a))", "x='a[$(touch pwn)]'; : ${!x}"} {
		if parserNames(l)["touch"] {
			t.Errorf("%q: the parser saw touch; the harness test no longer shows a hidden command", l)
		}
		if v := mustCompile(t, "allow").Decide(Input{Tool: "ssh_exec", Command: l, HasCommand: true}); v.Decision != Ask {
			t.Errorf("%q = %v, want ask", l, v.Decision)
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "cwd")); err != nil || len(ents) != 0 {
		t.Errorf("the harness's bash wrote to its directory: %v %v", ents, err)
	}
}

func mustCompile(t testing.TB, mode string, rules ...RuleSpec) *Policy {
	t.Helper()
	p, err := Compile(mode, rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
