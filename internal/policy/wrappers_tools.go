package policy

import "strings"

// This file holds the wrappers of util-linux, coreutils, procps,
// moreutils and other common tools that run a command they are given.
// Their options are listed in full (strict), so an option not known here
// makes the wrapper fail closed rather than misread where its command
// starts.

// envVar judges a NAME=VALUE word that env or sudo puts in the
// environment of the command it runs.
func (c *collector) envVar(argv []word, s string) {
	name, _, _ := strings.Cut(s, "=")
	switch {
	case isExecVar(name):
		c.setsVar(argv, name)
	case strings.ContainsAny(name, "%()"):
		c.risky(argv, "sets "+name+", which the shell or a program executes")
	}
}

// wrap unwraps `wrapper [options] [operands…] command…`, where operands
// is a fixed number of words. none is what the wrapper does with no
// command: runsNothing, or unknown(whyInput) for one that starts a shell.
func wrap(o *optSpec, operands int, none unwrapped, stop ...string) func(*collector, []word) unwrapped {
	return func(_ *collector, argv []word) unwrapped {
		k, opts, ok := o.scan(argv)
		if !ok {
			return unknown(whyOption)
		}
		if hasOpt(opts, append(stop, "help", "version", "h", "V")...) {
			return unwrapped{kind: runsNothing}
		}
		if k+operands >= len(argv) {
			return none
		}
		return runs(argv, k+operands)
	}
}

var nothing = unwrapped{kind: runsNothing}

// longs builds a long-option map: names ending in '=' take a value.
func longs(names ...string) map[string]bool {
	m := make(map[string]bool, len(names)+2)
	for _, n := range names {
		v := strings.HasSuffix(n, "=")
		m[strings.TrimSuffix(n, "=")] = v
	}
	m["help"], m["version"] = false, false
	return m
}

// toolWrappers returns the wrappers of this file by command name.
func toolWrappers() map[string]func(*collector, []word) unwrapped {
	input := unknown(whyInput)
	setarchOpts := &optSpec{strict: true, flags: "RFZLXBIST3vh", long: longs("addr-no-randomize", "fdpic-funcptrs",
		"mmap-page-zero", "addr-compat-layout", "read-implies-exec", "32bit", "short-inode", "whole-seconds",
		"sticky-timeouts", "3gb", "4gb", "uname-2.6", "verbose", "list", "show=")}
	m := map[string]func(*collector, []word) unwrapped{
		"flock": unwrapFlock,
		"setpriv": wrap(&optSpec{strict: true, flags: "dhV", long: longs("dump", "no-new-privs", "nnp",
			"ambient-caps=", "inh-caps=", "bounding-set=", "ruid=", "euid=", "rgid=", "egid=", "reuid=", "regid=",
			"clear-groups", "keep-groups", "init-groups", "groups=", "securebits=", "pdeathsig=", "selinux-label=",
			"apparmor-profile=", "landlock-access=", "landlock-rule=", "reset-env", "list-caps", "seccomp-filter=")},
			0, nothing, "d", "dump", "list-caps"),
		"unshare": wrap(&optSpec{strict: true, flags: "muinpUCTfrcl", vals: "SGRw", long: longs("mount", "uts", "ipc",
			"net", "pid", "user", "cgroup", "time", "fork", "kill-child", "mount-proc", "map-user=", "map-users=",
			"map-group=", "map-groups=", "map-auto", "map-root-user", "map-current-user", "propagation=",
			"setgroups=", "keep-caps", "setuid=", "setgid=", "root=", "wd=", "monotonic=", "boottime=", "load-interp=")},
			0, input),
		"script":           unwrapScript,
		"scriptlive":       func(*collector, []word) unwrapped { return unknown("it replays recorded input into a shell") },
		"watch":            unwrapWatch,
		"chroot":           wrap(&optSpec{strict: true, long: longs("userspec=", "groups=", "skip-chdir")}, 1, input),
		"pkexec":           wrap(&optSpec{strict: true, long: longs("user=", "keep-cwd", "disable-internal-agent")}, 0, input),
		"parallel":         unwrapParallel,
		"sem":              unwrapParallel,
		"ssh":              unwrapSSH,
		"nsenter":          unwrapNsenter,
		"setarch":          unwrapSetarch(setarchOpts, true),
		"prlimit":          wrap(&optSpec{strict: true, flags: "hV", vals: "po", optional: "cdefilmnqrstuvxy", long: longs("pid=", "output=", "noheadings", "raw", "verbose", "as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice", "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack")}, 0, nothing, "p", "pid"),
		"runcon":           unwrapRuncon,
		"numactl":          wrap(&optSpec{strict: true, flags: "aslbH", vals: "imNCpPwcLSTf", long: longs("all", "interleave=", "weighted-interleave=", "membind=", "cpunodebind=", "physcpubind=", "localalloc", "preferred=", "preferred-many=", "balancing", "show", "hardware", "cpubind=", "huge", "touch", "strict", "shmmode=", "shmid=", "shm=", "file=", "length=", "offset=", "dump", "dump-nodes")}, 0, nothing, "s", "show", "H", "hardware"),
		"cgexec":           wrap(&optSpec{strict: true, flags: "bh", vals: "gr", long: longs("sticky")}, 0, nothing),
		"firejail":         unwrapFirejail,
		"faketime":         wrap(&optSpec{strict: true, flags: "mf", vals: "p", long: longs("exclude-monotonic")}, 1, nothing),
		"catchsegv":        wrap(&optSpec{strict: true}, 0, nothing),
		"valgrind":         unwrapDashDash,
		"strace":           wrap(&optSpec{strict: true, flags: "cdfFhiqrtTvVwxyzCDkZnAY", vals: "abeEIoOpPsSuXU", long: longs("output=", "attach=", "user=", "trace=", "signal=", "status=", "env=", "summary-only", "summary", "follow-forks", "output-separately", "decode-fds", "decode-pids", "no-abbrev", "verbose", "raw=", "read=", "write=", "quiet=", "seccomp-bpf", "string-limit=", "columns=", "const-print-style=", "absolute-timestamps", "relative-timestamps", "syscall-times", "instruction-pointer", "stack-traces", "kill-on-exit", "daemonize", "trace-path=", "syscall-limit=", "inject=", "fault=", "tips", "timestamps", "successful-only", "failed-only", "debug")}, 0, nothing, "p", "attach"),
		"ltrace":           wrap(&optSpec{strict: true, flags: "bcCfhiLrStTV", vals: "aADeFlnopsuwx", long: longs("align=", "demangle", "library=", "output=", "config=", "indent=")}, 0, nothing, "p"),
		"gdb":              unwrapGdb,
		"dbus-run-session": wrap(&optSpec{strict: true, long: longs("config-file=")}, 0, nothing),
		"systemd-run": wrap(&optSpec{strict: true, flags: "rGqdPtSh", vals: "upEMH", long: longs("no-ask-password",
			"scope", "unit=", "property=", "description=", "slice=", "slice-inherit", "expand-environment=", "remain-after-exit",
			"send-sighup", "service-type=", "uid=", "gid=", "nice=", "working-directory=", "same-dir", "setenv=", "pty",
			"pipe", "quiet", "verbose", "wait", "collect", "user", "system", "machine=", "host=", "on-active=", "on-boot=",
			"on-startup=", "on-unit-active=", "on-unit-inactive=", "on-calendar=", "on-clock-change", "on-timezone-change",
			"path-property=", "socket-property=", "timer-property=", "no-block", "shell", "json=", "ignore-failure",
			"background=", "job-mode=")}, 0, nothing),
		"sg":           unwrapSg,
		"newgrp":       func(*collector, []word) unwrapped { return unknown(whyInput) },
		"expect":       unwrapExpect,
		"entr":         unwrapEntr,
		"uclampset":    wrap(&optSpec{strict: true, flags: "aRv", vals: "mMp", long: longs("all-tasks", "pid=", "system", "reset-on-fork", "verbose", "max=", "min=")}, 0, nothing, "p", "pid", "system"),
		"choom":        wrap(&optSpec{strict: true, vals: "pn", long: longs("pid=", "adjust=")}, 0, nothing, "p", "pid"),
		"enosys":       wrap(&optSpec{strict: true, flags: "lm", vals: "si", long: longs("syscall=", "ioctl=", "list", "list-ioctl", "dump=")}, 0, nothing, "l", "list", "m", "list-ioctl"),
		"pipesz":       wrap(&optSpec{strict: true, flags: "cgqvirno", vals: "fs", long: longs("check", "get", "quiet", "verbose", "file=", "fd=", "set=", "stdin", "stdout", "stderr")}, 0, nothing),
		"chronic":      wrap(&optSpec{strict: true, flags: "ev"}, 0, nothing),
		"ifne":         wrap(&optSpec{strict: true, flags: "n"}, 0, nothing),
		"lckdo":        wrap(&optSpec{strict: true, flags: "qw"}, 1, nothing),
		"zrun":         wrap(&optSpec{strict: true}, 0, nothing),
		"pee":          unwrapEachScript,
		"mispipe":      unwrapEachScript,
		"hyperfine":    unwrapHyperfine,
		"xvfb-run":     wrap(&optSpec{strict: true, flags: "ah", vals: "efnpsw", long: longs("auto-servernum", "error-file=", "server-args=", "xauth-protocol=", "auth-file=", "server-num=", "wait=", "auto-display")}, 0, nothing),
		"fakeroot":     wrap(&optSpec{strict: true, flags: "uh", vals: "is", long: longs("lib=", "faked=", "unknown-is-real")}, 0, input),
		"eatmydata":    wrap(&optSpec{strict: true}, 0, nothing),
		"torsocks":     wrap(&optSpec{strict: true, flags: "diq6", vals: "uapP", long: longs("user=", "pass=", "address=", "port=", "shell", "isolate", "quiet", "debug")}, 0, input),
		"proxychains":  wrap(&optSpec{strict: true, flags: "q", vals: "f"}, 0, nothing),
		"proxychains4": wrap(&optSpec{strict: true, flags: "q", vals: "f"}, 0, nothing),
		"unbuffer":     wrap(&optSpec{strict: true, flags: "p"}, 0, nothing),
		"rlwrap":       func(*collector, []word) unwrapped { return unknown("rlwrap's options are not parsed") },
		"bwrap":        func(*collector, []word) unwrapped { return unknown("bwrap's options are not parsed") },
		"sshpass":      wrap(&optSpec{strict: true, flags: "ev", vals: "fdpPo"}, 0, nothing),
		"ccache":       wrap(&optSpec{strict: true}, 0, nothing),
		"distcc":       wrap(&optSpec{strict: true}, 0, nothing),
		"caffeinate":   wrap(&optSpec{strict: true, flags: "dimsu", vals: "tw"}, 0, nothing),
		"at":           func(*collector, []word) unwrapped { return unknown("at runs commands it reads from its input later") },
		"batch": func(*collector, []word) unwrapped {
			return unknown("batch runs commands it reads from its input later")
		},
		"direnv": unwrapDirenv,
		"tmux":   unwrapTmux,
		"screen": unwrapTmux,
	}
	for _, n := range []string{"linux32", "linux64", "i386", "x86_64", "uname26", "i486", "i586", "i686", "arm", "armv7l", "armv8l", "aarch64", "ppc", "ppc64", "s390", "s390x"} {
		m[n] = unwrapSetarch(setarchOpts, false)
	}
	return m
}

// unwrapFlock: flock [options] file|dir command [args…], flock [options]
// file|dir -c command, or flock [options] fd (no command).
func unwrapFlock(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "sexnouFvhV", vals: "wEc", long: longs("shared", "exclusive", "nonblock",
		"close", "unlock", "timeout=", "wait=", "conflict-exit-code=", "nofork", "verbose", "command=", "fcntl", "no-fork")}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	for _, op := range opts {
		if op.name == "c" || op.name == "command" {
			return unwrapped{kind: runsScript, script: op.val}
		}
	}
	if hasOpt(opts, "help", "version", "h", "V") || k+1 >= len(argv) {
		return nothing
	}
	next := argv[k+1]
	if !next.lit && (next.pre == "" || next.pre[0] == '-') {
		return unknown(whyOption)
	}
	if next.lit && (next.s == "-c" || next.s == "--command") {
		if k+2 < len(argv) {
			return unwrapped{kind: runsScript, script: argv[k+2]}
		}
		return nothing
	}
	return runs(argv, k+1)
}

// unwrapScript: script [options] [file]; -c runs a command through the
// shell, and without it script starts an interactive shell.
func unwrapScript(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "aefqhV", vals: "cEIOBTmo", optional: "t", long: longs("append", "command=",
		"echo=", "return", "flush", "force", "log-in=", "log-out=", "log-io=", "log-timing=", "logging-format=",
		"output-limit=", "quiet", "timing")}
	_, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	for _, op := range opts {
		if op.name == "c" || op.name == "command" {
			return unwrapped{kind: runsScript, script: op.val}
		}
	}
	if hasOpt(opts, "help", "version", "h", "V") {
		return nothing
	}
	return unknown(whyInput)
}

// joined joins words into one script, as watch, ssh and sg do before
// they hand it to a shell. It is literal only if every word is.
func joined(ws []word) word {
	parts := make([]string, len(ws))
	for i, w := range ws {
		if !w.lit {
			return word{s: strings.Join(parts[:i], " ")}
		}
		parts[i] = w.s
	}
	s := strings.Join(parts, " ")
	return word{s: s, pre: s, lit: true}
}

// unwrapWatch: watch [options] command…; the words are joined and run by
// sh -c, or run as they are with -x.
func unwrapWatch(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "bcCeghprtwxvfq", vals: "nsq", optional: "d", long: longs("beep", "color",
		"no-color", "errexit", "chgexit", "equexit=", "differences", "interval=", "precise", "no-rerun", "no-title",
		"no-wrap", "no-linewrap", "exec", "shotsdir=", "follow")}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "help", "version", "h", "v") || k >= len(argv) {
		return nothing
	}
	if hasOpt(opts, "x", "exec") {
		return runs(argv, k)
	}
	return unwrapped{kind: runsScript, script: joined(argv[k:])}
}

// unwrapParallel: GNU parallel [options] command… [::: args…], whose
// command line is run by a shell with the arguments quoted; or moreutils
// parallel [options] [command] -- args…. Options other than a few common
// ones fail closed.
func unwrapParallel(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "kvX0qmu", vals: "jnNP", long: longs("jobs=", "keep-order", "bar", "progress",
		"eta", "verbose", "halt=", "dry-run", "tag", "line-buffer", "null", "max-args=", "delay=", "timeout=",
		"group", "ungroup", "will-cite", "no-notice", "quote", "xargs", "semaphore", "id=", "fg", "bg")}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "help", "version") {
		return nothing
	}
	end := len(argv)
	for i := k; i < len(argv); i++ {
		if a := argv[i]; a.lit && (a.s == "--" || strings.HasPrefix(a.s, ":::")) {
			end = i
			break
		}
	}
	if end == k {
		return unknown("it takes the commands to run from its input or its arguments")
	}
	if end < len(argv) && argv[end].s == "--" {
		// moreutils: the command, with each argument appended.
		return unwrapped{kind: runsArgv, argv: append(append([]word(nil), argv[k:end]...), word{s: "…", hidden: true})}
	}
	script := joined(argv[k:end])
	if script.lit && !strings.Contains(script.s, "{") {
		// The arguments are appended as (quoted) words.
		script.s += " {}"
		script.pre = script.s
	}
	return unwrapped{kind: runsScript, script: script}
}

// unwrapSSH: ssh [options] destination [command…]; the command's words
// are joined and run by the remote user's shell. With none, ssh logs in
// and the remote shell reads its input.
func unwrapSSH(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "46AaCfGgKkMNnqsTtVvXxYy", vals: "BbcDEeFIiJLlmOoPpQRSWw"}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "V", "G", "Q", "O") {
		return nothing
	}
	if k >= len(argv) {
		return nothing // no destination: an error
	}
	if k+1 >= len(argv) {
		if hasOpt(opts, "N", "W") {
			return nothing
		}
		return unknown("it logs in, and the remote shell reads commands from its input")
	}
	return unwrapped{kind: runsScript, script: joined(argv[k+1:])}
}

// unwrapNsenter: nsenter [options] [program [args…]]; with no program it
// starts a shell. Namespace options take a file only when attached.
func unwrapNsenter(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "aFceZhV", vals: "tSGWN", optional: "muinpUCTrw", long: longs("all", "target=",
		"mount", "uts", "ipc", "net", "pid", "cgroup", "user", "time", "user-parent", "setuid=", "setgid=",
		"preserve-credentials", "keep-caps", "root", "wd", "wdns=", "env", "no-fork", "follow-context", "join-cgroup", "net-socket=")}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "help", "version", "h", "V") {
		return nothing
	}
	if k >= len(argv) {
		return unknown(whyInput)
	}
	return runs(argv, k)
}

// unwrapSetarch: setarch [arch] [options] [program [args…]] (and linux32,
// linux64, … without the arch); with no program it starts a shell.
func unwrapSetarch(o *optSpec, arch bool) func(*collector, []word) unwrapped {
	return func(_ *collector, argv []word) unwrapped {
		rest := argv
		if arch && len(argv) > 1 && argv[1].lit && !strings.HasPrefix(argv[1].s, "-") {
			rest = append([]word{argv[0]}, argv[2:]...)
		}
		k, opts, ok := o.scan(rest)
		if !ok {
			return unknown(whyOption)
		}
		if hasOpt(opts, "help", "version", "h", "V", "list", "show") {
			return nothing
		}
		if k >= len(rest) {
			if arch && len(argv) < 2 {
				return nothing
			}
			return unknown(whyInput)
		}
		return runs(rest, k)
	}
}

// unwrapRuncon: runcon context command…, or runcon [-c] [-u U] [-r R]
// [-t T] [-l L] command….
func unwrapRuncon(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "c", vals: "urtl", long: longs("compute", "user=", "role=", "type=", "range=")}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "help", "version") {
		return nothing
	}
	if !hasOpt(opts, "u", "r", "t", "l", "user", "role", "type", "range") {
		k++ // the context
	}
	return runs(argv, k)
}

// unwrapFirejail: firejail [--option[=value]…] [program [args…]]; every
// option is one word; with no program it starts a shell.
func unwrapFirejail(_ *collector, argv []word) unwrapped {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if a.pre != "" && a.pre[0] != '-' {
				return runs(argv, i)
			}
			return unknown(whyOption)
		}
		switch {
		case a.s == "--":
			if i+1 >= len(argv) {
				return unknown(whyInput)
			}
			return runs(argv, i+1)
		case strings.HasPrefix(a.s, "--shell=") || a.s == "--join" || strings.HasPrefix(a.s, "--join"):
			return unknown("it runs a shell or joins a sandbox")
		case a.s == "--help" || a.s == "--version" || a.s == "--list" || a.s == "--tree":
			return nothing
		case strings.HasPrefix(a.s, "-"):
		default:
			return runs(argv, i)
		}
	}
	return unknown(whyInput)
}

// unwrapDashDash: valgrind-style wrappers, whose options are each one
// word (--name=value): the command is the first word that is not one.
func unwrapDashDash(_ *collector, argv []word) unwrapped {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if a.pre != "" && a.pre[0] != '-' {
				return runs(argv, i)
			}
			return unknown(whyOption)
		}
		if a.s == "--" {
			return runs(argv, i+1)
		}
		if a.s == "--help" || a.s == "--version" {
			return nothing
		}
		if !strings.HasPrefix(a.s, "-") {
			return runs(argv, i)
		}
	}
	return nothing
}

// unwrapGdb: gdb runs the program of --args only when told to; -ex and -x
// run debugger commands, which can run shell commands.
func unwrapGdb(_ *collector, argv []word) unwrapped {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			return unknown(whyOption)
		}
		if a.s == "--args" || a.s == "-args" {
			return runs(argv, i+1)
		}
	}
	return nothing
}

// unwrapSg: sg [-] [group [-c] command]; the command is one string run by
// /bin/sh -c; with none sg starts a shell.
func unwrapSg(_ *collector, argv []word) unwrapped {
	i := 1
	if i < len(argv) && argv[i].lit && argv[i].s == "-" {
		i++
	}
	i++ // the group
	if i < len(argv) && argv[i].lit && argv[i].s == "-c" {
		i++
	}
	if i >= len(argv) {
		return unknown(whyInput)
	}
	return unwrapped{kind: runsScript, script: joined(argv[i:])}
}

// unwrapExpect: expect runs Tcl, which can spawn anything; with -c or a
// script from its input it is not judged.
func unwrapExpect(_ *collector, argv []word) unwrapped {
	for _, a := range argv[1:] {
		if !a.lit || strings.HasPrefix(a.s, "-c") || a.s == "-" || a.s == "-i" {
			return unknown("it runs Tcl commands that can start any program")
		}
	}
	if len(argv) == 1 {
		return unknown(whyInput)
	}
	return nothing
}

// unwrapEntr: entr [-acdnprsz] utility [args…]; with -s the utility is a
// script run by the shell.
func unwrapEntr(_ *collector, argv []word) unwrapped {
	o := &optSpec{strict: true, flags: "acdnprszx"}
	k, opts, ok := o.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if k >= len(argv) {
		return nothing
	}
	if hasOpt(opts, "s") {
		return unwrapped{kind: runsScript, script: argv[k]}
	}
	cmd := make([]word, 0, len(argv)-k)
	for _, a := range argv[k:] {
		if a.lit && strings.Contains(a.s, "/_") {
			a = word{s: a.s}
		}
		cmd = append(cmd, a)
	}
	return unwrapped{kind: runsArgv, argv: cmd}
}

// unwrapEachScript: pee and mispipe run each argument as a shell command.
// Only the first is returned; the collector judges the rest through
// runsScripts.
func unwrapEachScript(c *collector, argv []word) unwrapped {
	return scripts(c, argv, 1)
}

// unwrapHyperfine: hyperfine [options] command…; each command, and the
// --prepare, --setup, --cleanup and --conclude commands, is a shell
// command.
func unwrapHyperfine(c *collector, argv []word) unwrapped {
	for _, a := range argv[1:] {
		if !a.lit {
			return unknown(whyOption)
		}
	}
	return scripts(c, argv, 1)
}

// scripts judges every word from k on that does not start with '-' as a
// shell script, and says the wrapper runs nothing more.
func scripts(c *collector, argv []word, k int) unwrapped {
	var first *word
	for i := k; i < len(argv); i++ {
		a := argv[i]
		if a.lit && strings.HasPrefix(a.s, "-") {
			continue
		}
		if first == nil {
			first = &argv[i]
			continue
		}
		c.nested(argv, a, c.depth)
	}
	if first == nil {
		return nothing
	}
	return unwrapped{kind: runsScript, script: *first}
}

// unwrapDirenv: direnv exec DIR command…; other subcommands run nothing
// they are given.
func unwrapDirenv(_ *collector, argv []word) unwrapped {
	if len(argv) > 1 && argv[1].lit && argv[1].s == "exec" {
		return unknown("it loads a directory's .envrc, which is a script, before the command")
	}
	return nothing
}

// unwrapTmux: tmux and screen start shells and run commands from many
// places (new-session, send-keys, run-shell, -X stuff); with arguments
// they are not judged.
func unwrapTmux(_ *collector, argv []word) unwrapped {
	if len(argv) > 1 {
		for _, a := range argv[1:] {
			if !a.lit || !(a.s == "ls" || a.s == "list-sessions" || a.s == "-ls" || a.s == "-list" || a.s == "-V" || a.s == "-v") {
				return unknown("it runs shell commands given in its arguments or sends keys to a shell")
			}
		}
		return nothing
	}
	return unknown(whyInput)
}
