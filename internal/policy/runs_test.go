package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// files is a made-up file system for Exec.Look: path → resolved path and
// #! line.
type files map[string]struct {
	resolved string
	shebang  []string
}

func (fs files) look(p string) (string, []string, error) {
	f, ok := fs[p]
	if !ok {
		return p, nil, nil
	}
	if f.resolved == "" {
		return "", nil, errors.New("permission denied")
	}
	return f.resolved, f.shebang, nil
}

// TestDecideExecRuns: an exec is judged as what it runs: a #! script as
// its interpreter (with its argument, the script and the arguments), an
// interpreter that is a script in turn, the program the dynamic loader
// loads (after its options, under --argv0 too), and a multi-call program
// as the command its name says. What is allowed stays allowed.
func TestDecideExecRuns(t *testing.T) {
	p := mustCompileRules(t, "allow", []RuleSpec{
		{Command: "rm *", Decision: "deny"},
		{Command: "git push *", Decision: "deny"},
	})
	fs := files{
		"/w/rmf":                       {resolved: "/w/rmf", shebang: []string{"/bin/rm", "-f"}},
		"/bin/rm":                      {resolved: "/usr/bin/rm"},
		"/w/push":                      {resolved: "/w/push", shebang: []string{"/usr/bin/git", "push"}},
		"/w/nested":                    {resolved: "/w/nested", shebang: []string{"/w/rmf"}},
		"/w/ok.sh":                     {resolved: "/w/ok.sh", shebang: []string{"/bin/sh"}},
		"/bin/sh":                      {resolved: "/usr/bin/dash"},
		"/w/env.py":                    {resolved: "/w/env.py", shebang: []string{"/usr/bin/env", "python3"}},
		"/dev/fd/9":                    {resolved: "/usr/bin/git"},
		"x":                            {resolved: "/usr/bin/git"},
		"/w/x":                         {resolved: "/usr/bin/git"},
		"/w/secret":                    {}, // cannot be read
		"/lib64/ld.so":                 {resolved: "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		"/w/loop":                      {resolved: "/w/loop", shebang: []string{"/w/loop"}},
		"/usr/lib/git-core/git-push":   {resolved: "/usr/lib/git-core/git"},
		"/usr/lib/git-core/git-status": {resolved: "/usr/lib/git-core/git"},
	}
	const ld = "/lib64/ld-linux-x86-64.so.2"
	tests := []struct {
		name string
		path string
		argv []string
		want Decision
		rule string
	}{
		{"#!/bin/rm -f", "/w/rmf", []string{"./rmf", "victim"}, Deny, `"rm *"`},
		{"#!/usr/bin/git push", "/w/push", []string{"./push", "origin"}, Deny, `"git push *"`},
		{"a script whose interpreter is a script", "/w/nested", []string{"nested", "victim"}, Deny, `"rm *"`},
		{"an interpreter that loops is still judged", "/w/loop", []string{"loop"}, Allow, ""},
		{"#!/bin/sh runs", "/w/ok.sh", []string{"./ok.sh", "a"}, Allow, ""},
		{"#!/usr/bin/env python3 runs", "/w/env.py", []string{"./env.py"}, Allow, ""},
		{"/dev/fd/9 push", "/dev/fd/9", []string{"/dev/fd/9", "push"}, Deny, `"git push *"`},
		{"x push", "/w/x", []string{"x", "push"}, Deny, `"git push *"`},
		{"a program that cannot be read", "/w/secret", []string{"secret"}, Deny, unjudgeable},
		{"ld.so git push", ld, []string{ld, "/usr/bin/git", "push"}, Deny, `"git push *"`},
		{"ld.so by a symlink of another name", "/lib64/ld.so", []string{"ldso", "/usr/bin/git", "push"}, Deny, `"git push *"`},
		{"ld.so options before the program", ld, []string{ld, "--library-path", "/l", "--inhibit-cache", "--preload", "p.so", "--audit", "a.so",
			"--inhibit-rpath", "x", "--glibc-hwcaps-prepend", "y", "--glibc-hwcaps-mask", "z", "--argv0", "git", "/usr/bin/git", "push"}, Deny, `"git push *"`},
		{"ld.so --argv0 git-push git", ld, []string{ld, "--argv0", "git-push", "/usr/bin/git"}, Deny, `"git push *"`},
		{"ld.so --argv0=rm (musl form) of another program", ld, []string{ld, "--argv0=ls", "/usr/bin/rm", "victim"}, Deny, `"rm *"`},
		{"ld.so -- rm (musl)", ld, []string{ld, "--", "/bin/rm", "victim"}, Deny, `"rm *"`},
		{"ld.so of a program by /dev/fd", ld, []string{ld, "/dev/fd/9", "push"}, Deny, `"git push *"`},
		{"ld.so of a program by a symlink", ld, []string{ld, "x", "push"}, Deny, `"git push *"`},
		{"ld.so --list runs nothing", ld, []string{ld, "--list", "/usr/bin/git", "push"}, Allow, ""},
		{"ld.so with an unknown option fails closed", ld, []string{ld, "--frobnicate", "/usr/bin/git", "push"}, Deny, unjudgeable},
		{"ld.so running an allowed program", ld, []string{ld, "/usr/bin/git", "status"}, Allow, ""},
		{"git-core/git-push", "/usr/lib/git-core/git-push", []string{"/usr/lib/git-core/git-push", "origin"}, Deny, `"git push *"`},
		{"git renamed git-push by argv[0]", "/usr/bin/git", []string{"git-push"}, Deny, `"git push *"`},
		{"git-core/git-status runs", "/usr/lib/git-core/git-status", []string{"/usr/lib/git-core/git-status"}, Allow, ""},
		{"busybox rm", "/bin/busybox", []string{"busybox", "rm", "victim"}, Deny, `"rm *"`},
		{"toybox rm", "/bin/toybox", []string{"toybox", "rm", "victim"}, Deny, `"rm *"`},
		{"coreutils --coreutils-prog=rm", "/usr/bin/coreutils", []string{"coreutils", "--coreutils-prog=rm", "victim"}, Deny, `"rm *"`},
		{"busybox --list runs nothing", "/bin/busybox", []string{"busybox", "--list"}, Allow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := p.DecideExec(Exec{Tool: "ssh_exec", Path: tt.path, Argv: tt.argv, Look: fs.look})
			if v.Decision != tt.want || (tt.rule == "") != (v.Rule == "") || !strings.Contains(v.Rule, tt.rule) {
				t.Errorf("DecideExec = %v %q (%s), want %v with rule %q", v.Decision, v.Rule, v.Reason, tt.want, tt.rule)
			}
		})
	}
	// What a script runs is listed, so a caller can tell it from the argv.
	v := p.DecideExec(Exec{Tool: "ssh_exec", Path: "/w/push", Argv: []string{"./push", "origin"}, Look: fs.look})
	if !slices.ContainsFunc(v.Commands, func(c []string) bool {
		return slices.Equal(c, []string{"/usr/bin/git", "push", "/w/push", "origin"})
	}) || !strings.Contains(v.Reason, "/usr/bin/git push /w/push origin") {
		t.Errorf("commands %q, reason %q", v.Commands, v.Reason)
	}
	if v := p.DecideExec(Exec{Tool: "ssh_exec", Path: "/usr/bin/ls", Argv: []string{"ls"}, Look: fs.look}); len(v.Commands) != 1 {
		t.Errorf("a plain exec lists %q", v.Commands)
	}
}

// TestLoaderArgs: the loader's options are skipped as glibc's and musl's
// ld.so skip them; where the program starts is found, or known not to be.
func TestLoaderArgs(t *testing.T) {
	for _, tt := range []struct {
		argv       string
		k          int
		argv0      string
		run, known bool
	}{
		{"ld.so prog a", 1, "", true, true},
		{"ld.so --library-path /l prog", 3, "", true, true},
		{"ld.so --library-path=/l prog", 2, "", true, true},
		{"ld.so --inhibit-cache --verify prog", 0, "", false, true},
		{"ld.so --list prog", 0, "", false, true},
		{"ld.so --help", 0, "", false, true},
		{"ld.so --version prog", 0, "", false, true},
		{"ld.so --list-tunables", 0, "", false, true},
		{"ld.so --list-diagnostics", 0, "", false, true},
		{"ld.so --argv0 name prog", 3, "name", true, true},
		{"ld.so --argv0=name prog", 2, "name", true, true},
		{"ld.so --preload a.so --audit b.so --inhibit-rpath c --glibc-hwcaps-prepend d --glibc-hwcaps-mask e prog", 11, "", true, true},
		{"ld.so -x prog", 1, "", true, true},
		{"ld.so -- prog", 2, "", true, true},
		{"ld.so --", 0, "", false, true},
		{"ld.so --preload", 0, "", false, true},
		{"ld.so", 0, "", false, true},
		{"ld.so --bogus prog", 0, "", false, false},
	} {
		argv := literal(strings.Fields(tt.argv))
		k, argv0, run, known := loaderArgs(argv)
		got0 := ""
		if argv0 != nil {
			got0 = argv0.s
		}
		if k != tt.k || got0 != tt.argv0 || run != tt.run || known != tt.known {
			t.Errorf("loaderArgs(%q) = %d, %q, %v, %v; want %d, %q, %v, %v", tt.argv, k, got0, run, known, tt.k, tt.argv0, tt.run, tt.known)
		}
	}
	for name, want := range map[string]bool{
		"/lib64/ld-linux-x86-64.so.2": true, "ld-linux.so.2": true, "/lib/ld-musl-x86_64.so.1": true, "ld-2.31.so": true,
		"ld.so": true, "/lib64/ld64.so.2": true, "ld": false, "ld.bfd": false, "ld.lld": false, "gold": false, "old-ld.so": false,
	} {
		if isLoader(name) != want {
			t.Errorf("isLoader(%q) = %v", name, !want)
		}
	}
}

// TestLineJudgesRuns: the line judge refuses the dynamic loader running a
// denied program, and git's multi-call names, as it refuses the program
// itself; the same programs doing what is allowed pass.
func TestLineJudgesRuns(t *testing.T) {
	p := mustCompileRules(t, "allow", []RuleSpec{
		{Command: "rm *", Decision: "deny"},
		{Command: "git push *", Decision: "deny"},
	})
	for _, tt := range []struct {
		line string
		want Decision
	}{
		{"/lib64/ld-linux-x86-64.so.2 /usr/bin/git push", Deny},
		{"/lib64/ld-linux-x86-64.so.2 --library-path /lib --inhibit-cache /usr/bin/git push origin", Deny},
		{"ld.so --argv0 x /bin/rm victim", Deny},
		{"/lib64/ld-linux-x86-64.so.2 --argv0 git-push /usr/bin/git", Deny},
		{"sudo /lib/ld-musl-x86_64.so.1 -- rm -rf /", Deny},
		{"/lib64/ld-linux-x86-64.so.2 --weird /usr/bin/git push", Ask},
		{"/usr/lib/git-core/git-push origin main", Deny},
		{"git-push", Deny},
		{"busybox rm victim", Deny},
		{"toybox rm victim", Deny},
		{"/lib64/ld-linux-x86-64.so.2 /usr/bin/git status", Allow},
		{"/lib64/ld-linux-x86-64.so.2 --list /usr/bin/git", Allow},
		{"/usr/lib/git-core/git-status", Allow},
		{"busybox ls", Allow},
	} {
		v := p.Decide(Input{Tool: "ssh_exec", Command: tt.line, HasCommand: true})
		if v.Decision != tt.want && !(tt.want == Ask && v.Decision > Allow) {
			t.Errorf("Decide(%q) = %v (%s), want %v", tt.line, v.Decision, v.Reason, tt.want)
		}
	}
}
