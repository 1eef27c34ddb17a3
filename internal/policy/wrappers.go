package policy

import "strings"

// runKind says what a wrapper command runs.
type runKind uint8

const (
	runsNothing runKind = iota // no wrapped command: judge the argv as it is
	runsArgv                   // it runs unwrapped.argv
	runsScript                 // it runs unwrapped.script as shell code
	runsUnknown                // it runs something we cannot know statically
)

// unwrapped is what a wrapper runs.
type unwrapped struct {
	kind   runKind
	argv   []word
	script word
	why    string // for runsUnknown
}

func runs(argv []word, k int) unwrapped {
	if k >= len(argv) {
		return unwrapped{kind: runsNothing}
	}
	return unwrapped{kind: runsArgv, argv: argv[k:]}
}

func unknown(why string) unwrapped { return unwrapped{kind: runsUnknown, why: why} }

const (
	whyOption = "an option is not a literal, or not one it knows"
	whyInput  = "it starts a shell that reads commands from its input"
)

// wrapperFuncs maps a command's base name to how it wraps another command.
var wrapperFuncs map[string]func(*collector, []word) unwrapped

func init() {
	wrapperFuncs = map[string]func(*collector, []word) unwrapped{
		"sudo":    unwrapSudo,
		"doas":    unwrapDoas,
		"env":     unwrapEnv,
		"nice":    simpleWrapper(&niceOpts, 0),
		"timeout": simpleWrapper(&timeoutOpts, 1),
		"nohup":   simpleWrapper(&nohupOpts, 0),
		"time":    simpleWrapper(&timeOpts, 0),
		"command": unwrapCommand,
		"builtin": simpleWrapper(&optSpec{}, 0),
		"exec":    simpleWrapper(&execOpts, 0),
		"xargs":   unwrapXargs,
		"stdbuf":  simpleWrapper(&stdbufOpts, 0),
		"ionice":  unwrapIonice,
		"chrt":    unwrapChrt,
		"taskset": unwrapTaskset,
		"setsid":  simpleWrapper(&setsidOpts, 0),
		"su":      unwrapSu,
		"runuser": unwrapSu,
	}
	for name, u := range toolWrappers() {
		wrapperFuncs[name] = u
	}
	for _, sh := range []string{"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"} {
		wrapperFuncs[sh] = unwrapShell
	}
}

// optSpec describes a command's options well enough to find where its
// wrapped command starts, as getopt does with a leading '+' (options end
// at the first operand).
type optSpec struct {
	vals     string          // short options that take a value (attached or the next word)
	optional string          // short options whose value, if any, is attached
	long     map[string]bool // long options; true if it takes a value (after = or the next word)
	numeric  bool            // -N and --N are options (nice)
	// strict makes an option not listed (in flags, vals, optional or
	// long) end the scan as not ok: where the command starts is then not
	// known, and the wrapper fails closed.
	strict bool
	flags  string // short options without a value, for strict specs
}

// opt is one option found by scan.
type opt struct {
	name string // the short letter or the long name
	val  word
	has  bool // val is set
}

// scan returns the index of the first operand and the options before it.
// ok is false when a word in option position is not a literal, so where
// the operands start is not known.
func (o *optSpec) scan(argv []word) (k int, opts []opt, ok bool) {
	i := 1
	for i < len(argv) {
		a := argv[i]
		if !a.lit {
			// Input words (xargs) and words like x$y are operands; $opts
			// might be options.
			if a.hidden || a.pre != "" && a.pre[0] != '-' {
				return i, opts, true
			}
			return i, opts, false
		}
		s := a.s
		if s == "--" {
			return i + 1, opts, true
		}
		if len(s) < 2 || s[0] != '-' {
			return i, opts, true
		}
		i++
		if o.numeric && isDigits(strings.TrimLeft(s, "-")) {
			continue
		}
		if s[1] == '-' {
			name, val, hasVal := strings.Cut(s[2:], "=")
			name = o.longName(name)
			if _, known := o.long[name]; o.strict && !known {
				return i, opts, false
			}
			op := opt{name: name}
			if hasVal {
				op.val, op.has = word{s: val, pre: val, lit: true}, true
			} else if o.long[name] && i < len(argv) {
				op.val, op.has = argv[i], true
				i++
			}
			opts = append(opts, op)
			continue
		}
		for j := 1; j < len(s); j++ {
			ch := s[j]
			if o.strict && strings.IndexByte(o.flags+o.vals+o.optional, ch) < 0 {
				return i, opts, false
			}
			op := opt{name: s[j : j+1]}
			if strings.IndexByte(o.vals, ch) >= 0 || strings.IndexByte(o.optional, ch) >= 0 {
				if j+1 < len(s) {
					v := s[j+1:]
					op.val, op.has = word{s: v, pre: v, lit: true}, true
				} else if strings.IndexByte(o.vals, ch) >= 0 && i < len(argv) {
					op.val, op.has = argv[i], true
					i++
				}
				opts = append(opts, op)
				break
			}
			opts = append(opts, op)
		}
	}
	return min(i, len(argv)), opts, true
}

// longName resolves an unambiguous abbreviation of a long option, as
// getopt_long does.
func (o *optSpec) longName(name string) string {
	if _, ok := o.long[name]; ok || name == "" {
		return name
	}
	found := ""
	for full := range o.long {
		if strings.HasPrefix(full, name) {
			if found != "" {
				return name // ambiguous
			}
			found = full
		}
	}
	if found == "" {
		return name
	}
	return found
}

func hasOpt(opts []opt, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// skipAssignments skips NAME=VALUE words: sudo takes only valid names,
// env takes any word with '=' in it.
func skipAssignments(argv []word, k int, anyName bool) int {
	for ; k < len(argv); k++ {
		pre := argv[k].pre
		if anyName && !strings.Contains(pre, "=") || !anyName && !isAssignment(pre) {
			break
		}
	}
	return k
}

// simpleWrapper unwraps commands of the form `wrapper [options] [operands…] command…`
// where operands is a fixed number of words (timeout's duration).
func simpleWrapper(o *optSpec, operands int) func(*collector, []word) unwrapped {
	return func(_ *collector, argv []word) unwrapped {
		k, opts, ok := o.scan(argv)
		if !ok {
			return unknown(whyOption)
		}
		if hasOpt(opts, "help", "version") {
			return unwrapped{kind: runsNothing}
		}
		return runs(argv, k+operands)
	}
}

var (
	niceOpts    = optSpec{vals: "n", long: map[string]bool{"adjustment": true, "help": false, "version": false}, numeric: true}
	timeoutOpts = optSpec{vals: "ks", long: map[string]bool{
		"kill-after": true, "signal": true, "preserve-status": false, "foreground": false,
		"verbose": false, "help": false, "version": false,
	}}
	nohupOpts = optSpec{long: map[string]bool{"help": false, "version": false}}
	timeOpts  = optSpec{vals: "fo", long: map[string]bool{
		"format": true, "output": true, "append": false, "portability": false,
		"verbose": false, "quiet": false, "help": false, "version": false,
	}}
	execOpts   = optSpec{vals: "a"}
	stdbufOpts = optSpec{vals: "ioe", long: map[string]bool{
		"input": true, "output": true, "error": true, "help": false, "version": false,
	}}
	setsidOpts = optSpec{long: map[string]bool{"ctty": false, "fork": false, "wait": false, "help": false, "version": false}}
	sudoOpts   = optSpec{vals: "acCDghpRrTtUu", long: map[string]bool{
		"auth-type": true, "login-class": true, "close-from": true, "chdir": true,
		"group": true, "host": true, "prompt": true, "chroot": true, "role": true,
		"type": true, "command-timeout": true, "other-user": true, "user": true,
		"askpass": false, "background": false, "bell": false, "preserve-env": false,
		"edit": false, "help": false, "set-home": false, "login": false,
		"remove-timestamp": false, "reset-timestamp": false, "list": false,
		"non-interactive": false, "preserve-groups": false, "stdin": false,
		"shell": false, "version": false, "validate": false,
	}}
	doasOpts  = optSpec{vals: "Cu"}
	xargsOpts = optSpec{vals: "aEIdLnPs", optional: "eil", long: map[string]bool{
		"null": false, "arg-file": true, "delimiter": true, "eof": false,
		"replace": false, "max-lines": false, "max-args": true, "max-procs": true,
		"max-chars": true, "interactive": false, "verbose": false, "exit": false,
		"no-run-if-empty": false, "open-tty": false, "show-limits": false,
		"process-slot-var": true, "help": false, "version": false,
	}}
	ioniceOpts = optSpec{vals: "cnpPu", long: map[string]bool{
		"class": true, "classdata": true, "pid": true, "pgid": true, "uid": true,
		"ignore": false, "help": false, "version": false,
	}}
	chrtOpts = optSpec{vals: "TPD", long: map[string]bool{
		"sched-runtime": true, "sched-period": true, "sched-deadline": true,
		"all-tasks": false, "batch": false, "deadline": false, "fifo": false,
		"idle": false, "other": false, "rr": false, "ext": false, "reset-on-fork": false,
		"max": false, "pid": false, "verbose": false, "help": false, "version": false,
	}}
	tasksetOpts = optSpec{long: map[string]bool{"all-tasks": false, "pid": false, "cpu-list": false, "help": false, "version": false}}
)

// unwrapSudo: sudo [options] [VAR=value…] command…
func unwrapSudo(c *collector, argv []word) unwrapped {
	k, opts, ok := sudoOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "e", "edit", "help", "V", "version") {
		return unwrapped{kind: runsNothing} // sudoedit, or no command run
	}
	k0 := k
	k = skipAssignments(argv, k, false)
	for _, a := range argv[k0:k] {
		c.envVar(argv, a.pre)
	}
	if k >= len(argv) && hasOpt(opts, "i", "s", "login", "shell") {
		return unknown(whyInput)
	}
	return runs(argv, k)
}

// unwrapDoas: doas [-Lns] [-C config] [-u user] command…
func unwrapDoas(_ *collector, argv []word) unwrapped {
	k, opts, ok := doasOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "C", "L") {
		return unwrapped{kind: runsNothing}
	}
	if k >= len(argv) && hasOpt(opts, "s") {
		return unknown(whyInput)
	}
	return runs(argv, k)
}

// unwrapCommand: command [-p] command…; command -v/-V only looks it up.
func unwrapCommand(_ *collector, argv []word) unwrapped {
	k, opts, ok := (&optSpec{}).scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "v", "V") {
		return unwrapped{kind: runsNothing}
	}
	return runs(argv, k)
}

// unwrapEnv: env [options] [NAME=VALUE…] [command…]. -S splits a string
// into words that are processed as if given on the command line.
func unwrapEnv(c *collector, argv []word) unwrapped {
	args := append([]word(nil), argv[1:]...)
	splits := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.lit {
			if strings.Contains(a.pre, "=") {
				c.envVar(argv, a.pre)
				continue // NAME=$value
			}
			if a.pre != "" && a.pre[0] != '-' {
				return runs(args, i)
			}
			return unknown(whyOption)
		}
		s := a.s
		var split *word
		switch {
		case s == "--":
			return runs(args, skipAssignments(args, i+1, true))
		case s == "-":
			continue // same as -i
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s[2:], "=")
			name = envOpts.longName(name)
			if hasVal || !envOpts.long[name] {
				if name == "split-string" {
					split = &word{s: val, pre: val, lit: true}
				}
				break
			}
			if i+1 >= len(args) {
				return unwrapped{kind: runsNothing}
			}
			i++
			if name == "split-string" {
				split = &args[i]
			}
		case s != "" && s[0] == '-':
			for j := 1; j < len(s); j++ {
				ch := s[j]
				if ch != 'u' && ch != 'C' && ch != 'S' {
					continue
				}
				var v *word
				if j+1 < len(s) {
					v = &word{s: s[j+1:], pre: s[j+1:], lit: true}
				} else if i+1 < len(args) {
					i++
					v = &args[i]
				} else {
					return unwrapped{kind: runsNothing}
				}
				if ch == 'S' {
					split = v
				}
				break
			}
		case strings.Contains(s, "="):
			c.envVar(argv, s)
			continue
		default:
			return runs(args, i)
		}
		if split == nil {
			continue
		}
		if !split.lit {
			return unknown("the string for env -S is not a literal")
		}
		if splits++; splits > maxSplits {
			return unknown("too many env -S strings")
		}
		words, err := c.splitWords(split.s)
		if err != nil {
			return unknown("the string for env -S cannot be split: " + err.Error())
		}
		// Option processing starts again over the split words.
		args = append(words, args[i+1:]...)
		i = -1
	}
	return unwrapped{kind: runsNothing}
}

var envOpts = optSpec{long: map[string]bool{
	"ignore-environment": false, "null": false, "debug": false, "unset": true,
	"chdir": true, "split-string": true, "default-signal": false, "ignore-signal": false,
	"block-signal": false, "list-signal-handling": false, "help": false, "version": false,
}}

// splitWords splits a string into words with shell quoting (for env -S).
// Words with expansions stay non-literal: env does not run substitutions.
func (c *collector) splitWords(s string) ([]word, error) {
	var words []word
	for w, err := range c.parser.WordsSeq(strings.NewReader(s)) {
		if err != nil {
			return nil, err
		}
		words = append(words, wordOf(w, s))
	}
	return words, nil
}

// unwrapXargs: xargs [options] [command [initial-arguments]]. The words
// read from input are appended (a hidden non-literal word), or replace
// the -I string in the arguments. With no command xargs runs echo.
func unwrapXargs(_ *collector, argv []word) unwrapped {
	k, opts, ok := xargsOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "help", "version", "show-limits") {
		return unwrapped{kind: runsNothing}
	}
	repl := ""
	for _, o := range opts {
		switch o.name {
		case "I":
			if !o.val.lit {
				return unknown("the -I string is not a literal")
			}
			repl = o.val.s
		case "i", "replace":
			repl = "{}"
			if o.has && o.val.s != "" {
				repl = o.val.s
			}
		}
	}
	cmd := append([]word(nil), argv[k:]...)
	if len(cmd) == 0 {
		cmd = []word{{s: "echo", pre: "echo", lit: true}}
	}
	if repl == "" {
		return unwrapped{kind: runsArgv, argv: append(cmd, word{s: "…", hidden: true})}
	}
	for i, a := range cmd {
		if a.lit && strings.Contains(a.s, repl) {
			cmd[i] = word{s: a.s}
		}
	}
	return unwrapped{kind: runsArgv, argv: cmd}
}

// unwrapIonice: ionice [options] command…; with -p/-P/-u it changes
// running processes.
func unwrapIonice(_ *collector, argv []word) unwrapped {
	k, opts, ok := ioniceOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "p", "P", "u", "pid", "pgid", "uid", "help", "version") {
		return unwrapped{kind: runsNothing}
	}
	return runs(argv, k)
}

// unwrapChrt: chrt [options] [priority] command…; -p changes a running
// process.
func unwrapChrt(_ *collector, argv []word) unwrapped {
	k, opts, ok := chrtOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "p", "pid", "m", "max", "help", "version") {
		return unwrapped{kind: runsNothing}
	}
	if k < len(argv) && argv[k].lit && isDigits(argv[k].s) {
		k++
	}
	return runs(argv, k)
}

// unwrapTaskset: taskset [options] mask command…; -p changes a running
// process.
func unwrapTaskset(_ *collector, argv []word) unwrapped {
	k, opts, ok := tasksetOpts.scan(argv)
	if !ok {
		return unknown(whyOption)
	}
	if hasOpt(opts, "p", "pid", "help", "version") {
		return unwrapped{kind: runsNothing}
	}
	return runs(argv, k+1)
}

// unwrapSu: su and runuser run -c/--command (or -C/--session-command)
// through the user's shell; options and the user may come in any order.
func unwrapSu(_ *collector, argv []word) unwrapped {
	const vals = "cCsgGwu"
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if strings.HasPrefix(a.pre, "-") || a.pre == "" {
				return unknown(whyOption)
			}
			continue // the user
		}
		s := a.s
		switch {
		case s == "--" || s == "-" || len(s) < 2 || s[0] != '-':
			continue
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s[2:], "=")
			switch name {
			case "help", "version":
				return unwrapped{kind: runsNothing}
			case "command", "session-command":
				if hasVal {
					return unwrapped{kind: runsScript, script: word{s: val, pre: val, lit: true}}
				}
				if i+1 < len(argv) {
					return unwrapped{kind: runsScript, script: argv[i+1]}
				}
			case "user":
				// runuser --user=U [--] command…
				if hasVal {
					return runuserArgv(argv, i+1)
				}
				return runuserArgv(argv, i+2)
			case "shell", "group", "supp-group", "whitelist-environment":
				if !hasVal {
					i++
				}
			}
		default:
			for j := 1; j < len(s); j++ {
				ch := s[j]
				if strings.IndexByte(vals, ch) < 0 {
					continue
				}
				var v word
				if j+1 < len(s) {
					v = word{s: s[j+1:], pre: s[j+1:], lit: true}
				} else if i+1 < len(argv) {
					i++
					v = argv[i]
				}
				if ch == 'c' || ch == 'C' {
					return unwrapped{kind: runsScript, script: v}
				}
				if ch == 'u' {
					return runuserArgv(argv, i+1)
				}
				break
			}
		}
	}
	return unknown(whyInput)
}

// runuserArgv: runuser -u user [options] [--] command…; with no command
// it starts the user's shell.
func runuserArgv(argv []word, k int) unwrapped {
	for ; k < len(argv); k++ {
		a := argv[k]
		if !a.lit {
			return unknown(whyOption)
		}
		switch {
		case a.s == "--":
			return runs(argv, k+1)
		case a.s == "--command" || strings.HasPrefix(a.s, "--command=") || a.s == "--session-command" ||
			strings.HasPrefix(a.s, "--session-command=") ||
			len(a.s) > 1 && a.s[0] == '-' && a.s[1] != '-' && strings.ContainsAny(a.s, "cC"):
			return unwrapSu(nil, append([]word{argv[0]}, argv[k:]...))
		case a.s == "-g" || a.s == "-G" || a.s == "-s" || a.s == "-w" || a.s == "--group" ||
			a.s == "--supp-group" || a.s == "--shell" || a.s == "--whitelist-environment":
			k++ // takes a value
		case !strings.HasPrefix(a.s, "-"):
			return runs(argv, k)
		}
	}
	return unknown(whyInput)
}

// unwrapShell: bash/sh/… [options] -c script [name [args…]]. With a
// script file the shell is judged as it is; reading commands from its
// input (no operand, or -s) it fails closed.
func unwrapShell(_ *collector, argv []word) unwrapped {
	cmd, stdin := false, false
	i := 1
loop:
	for ; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if a.pre != "" && a.pre[0] != '-' && a.pre[0] != '+' {
				break
			}
			return unknown(whyOption)
		}
		s := a.s
		switch {
		case s == "--" || s == "-":
			i++
			break loop
		case s == "--help" || s == "--version":
			return unwrapped{kind: runsNothing}
		case strings.HasPrefix(s, "--"):
			if s == "--rcfile" || s == "--init-file" {
				i++
			}
		case len(s) >= 2 && (s[0] == '-' || s[0] == '+'):
			for j := 1; j < len(s); j++ {
				switch s[j] {
				case 'c':
					cmd = cmd || s[0] == '-'
				case 's':
					stdin = stdin || s[0] == '-'
				case 'o', 'O':
					i++ // takes the next word
				}
			}
		default:
			break loop
		}
	}
	switch {
	case cmd && i < len(argv):
		return unwrapped{kind: runsScript, script: argv[i]}
	case cmd:
		return unwrapped{kind: runsNothing} // -c without a script is an error
	case stdin || i >= len(argv):
		return unknown(whyInput)
	}
	return unwrapped{kind: runsNothing}
}
