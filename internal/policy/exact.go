package policy

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file finds what makes bash run something other than the simple
// commands the parser saw: history expansion, variables that the shell
// or a program executes, words that bash evaluates as code (arithmetic,
// subscripts, ${x@P}), builtins that change how later lines are read or
// run, and writes to files that a shell or git executes. Each is an item
// with why whyShell: it asks, or stays denied.

// risky adds an item for a construct that makes bash run more than what
// was judged. argv is shown to the approver; detail says what it does.
func (c *collector) risky(argv []word, detail string) {
	c.add(item{argv: argv, why: whyShell, detail: detail, extra: true})
}

// execVars are variables whose value the shell or a program it starts
// executes, loads or reads its configuration from. Prefix families are in
// isExecVar.
var execVars = map[string]bool{
	"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS2": true, "PS3": true, "PS4": true,
	"BASH_ENV": true, "ENV": true, "PATH": true, "IFS": true, "SHELLOPTS": true, "BASHOPTS": true,
	"CDPATH": true, "HOME": true, "XDG_CONFIG_HOME": true, "SHELL": true, "histchars": true,
	"HISTFILE": true, "INPUTRC": true, "BASH_LOADABLES_PATH": true, "BASH_XTRACEFD": true,
	"EXECIGNORE": true, "GLOBIGNORE": true, "BASH_COMPAT": true, "POSIXLY_CORRECT": true,
	"PAGER": true, "EDITOR": true, "VISUAL": true, "BROWSER": true, "LESSOPEN": true, "LESSCLOSE": true,
	"LESSKEYIN": true, "LESSKEY": true, "MANOPT": true,
	"PERL5OPT": true, "PERL5LIB": true, "PERLLIB": true, "PYTHONSTARTUP": true, "PYTHONPATH": true,
	"PYTHONHOME": true, "PYTHONINSPECT": true, "PYTHONWARNINGS": true, "PYTHONBREAKPOINT": true,
	"RUBYOPT": true, "RUBYLIB": true, "NODE_OPTIONS": true, "NODE_PATH": true,
	"JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true, "JDK_JAVA_OPTIONS": true, "DOTNET_STARTUP_HOOKS": true,
	"TAR_OPTIONS": true, "MAKEFLAGS": true, "MFLAGS": true, "RSYNC_RSH": true, "RSYNC_CONNECT_PROG": true,
	"CVS_RSH": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true, "TMUX": true,
	"BASH_ALIASES": true, "BASH_CMDS": true, "MAIL": true, "MAILPATH": true, "MAILCHECK": true,
	"HISTIGNORE": true, "HISTCONTROL": true, "TEXTDOMAIN": true, "TEXTDOMAINDIR": true,
}

// isExecVar reports whether assigning name can make a command that was
// judged run other code.
func isExecVar(name string) bool {
	if execVars[name] {
		return true
	}
	for _, p := range []string{"LD_", "GIT_", "BASH_FUNC_", "DYLD_", "NPM_CONFIG_", "npm_config_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return strings.HasSuffix(name, "_PAGER") || strings.HasSuffix(name, "EDITOR") || strings.HasSuffix(name, "_ASKPASS")
}

// isName reports whether s is a plain shell variable name.
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && (i == 0 || !(c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

// target judges a word that a builtin assigns to by name (read, printf
// -v, mapfile, getopts, declare, unset, for). A name with a subscript is
// evaluated as arithmetic, and a name that is not a literal could be
// anything.
func (c *collector) target(argv []word, w word) {
	switch {
	case !w.lit:
		c.risky(argv, "assigns to a variable whose name is only known when it runs")
	case isExecVar(w.s):
		c.setsVar(argv, w.s)
	case !isName(w.s) && !isDigits(w.s):
		c.runsOnly(argv, "names a variable with a subscript, which bash evaluates as code")
	}
}

// assign judges an assignment before a command, or one standing alone.
func (c *collector) assign(a *syntax.Assign, src string) {
	if a.Name == nil {
		return
	}
	if isExecVar(a.Name.Value) {
		c.setsVarNode(src, a, a.Name.Value)
		return
	}
	if a.Index != nil && !arithLiteral(a.Index) {
		c.runsOnlyNode(src, a, "has a subscript that bash evaluates as code")
	}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			if e.Index != nil && !arithLiteral(e.Index) {
				c.runsOnlyNode(src, a, "has a subscript that bash evaluates as code")
				return
			}
		}
	}
}

// decl judges a declaration: -i and -n make later values code, names with
// subscripts are evaluated, and a word that is not a literal may be any
// assignment (declare "$x").
func (c *collector) decl(d *syntax.DeclClause, argv []word, src string) {
	for _, a := range d.Args {
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			w := wordOf(a.Value, src)
			if !w.lit {
				c.risky(argv, "declares with a word that is only known when it runs, which bash may evaluate as an assignment")
				continue
			}
			if strings.HasPrefix(w.s, "-") || strings.HasPrefix(w.s, "+") {
				if strings.ContainsAny(w.s[1:], "in") {
					c.runsOnly(argv, "declares an integer or a reference (-i, -n), whose values bash evaluates as code")
				}
				continue
			}
			name, val, _ := strings.Cut(w.s, "=")
			name = strings.TrimSuffix(name, "+")
			c.target(argv, word{s: name, pre: name, lit: true})
			if strings.HasPrefix(val, "(") {
				// declare 'a=([$(cmd)]=1)' is still a compound assignment.
				c.runsOnly(argv, "declares an array from a quoted string, whose subscripts bash evaluates as code")
			}
		case a.Name != nil:
			if isExecVar(a.Name.Value) {
				c.setsVar(argv, a.Name.Value)
			}
			c.assign(a, src)
		}
	}
}

// arithLiteral reports whether an arithmetic expression is made of
// numbers only. A variable name in arithmetic is evaluated recursively as
// arithmetic, so its value ('a[$(cmd)]') can run commands.
func arithLiteral(x syntax.ArithmExpr) bool {
	switch x := x.(type) {
	case nil:
		return true
	case *syntax.Word:
		if len(x.Parts) != 1 {
			return false
		}
		if p, ok := x.Parts[0].(*syntax.ParamExp); ok {
			return numericParam(p)
		}
		l := x.Lit()
		return l != "" && l[0] >= '0' && l[0] <= '9'
	case *syntax.BinaryArithm:
		return arithLiteral(x.X) && arithLiteral(x.Y)
	case *syntax.UnaryArithm:
		return arithLiteral(x.X)
	case *syntax.ParenArithm:
		return arithLiteral(x.X)
	}
	return false
}

// numericParam reports whether a parameter expansion is always a number
// bash does not evaluate further: $#, $?, $$, $! and ${#name}.
func numericParam(p *syntax.ParamExp) bool {
	if p.Param == nil || p.Excl || p.Slice != nil || p.Repl != nil || p.Exp != nil || p.Names != 0 {
		return false
	}
	if p.Length {
		if p.Index == nil {
			return true
		}
		w, ok := p.Index.(*syntax.Word)
		return ok && (w.Lit() == "@" || w.Lit() == "*")
	}
	switch p.Param.Value {
	case "#", "?", "$", "!":
		return p.Index == nil
	}
	return false
}

// safeTransforms are ${x@op} operators that only quote or describe.
const safeTransforms = "QEAKakULu"

// param judges a parameter expansion: indirection, subscripts and slices
// are evaluated, and ${x@P} expands a prompt string, running what it
// names.
func (c *collector) param(p *syntax.ParamExp, src string) {
	all := false
	if w, ok := p.Index.(*syntax.Word); ok {
		l := w.Lit()
		all = l == "@" || l == "*"
	}
	switch {
	case p.Excl && p.Names == 0 && !all:
		c.runsOnlyNode(src, p, "expands a variable named by another variable's value, which bash evaluates as code")
	case p.Index != nil && !all && !arithLiteral(p.Index):
		c.runsOnlyNode(src, p, "has a subscript that bash evaluates as code")
	case p.Slice != nil && (!arithLiteral(p.Slice.Offset) || !arithLiteral(p.Slice.Length)):
		c.runsOnlyNode(src, p, "has an offset that bash evaluates as code")
	case p.Exp != nil && p.Exp.Op == syntax.OtherParamOps:
		op := ""
		if p.Exp.Word != nil {
			op = p.Exp.Word.Lit()
		}
		if len(op) != 1 || !strings.Contains(safeTransforms, op) {
			c.runsOnlyNode(src, p, "expands a value as a prompt string (@P), which runs the commands in it")
		}
	}
}

// isArithTest reports whether a [[ ]] operator compares integers, which
// bash evaluates as arithmetic.
func isArithTest(op syntax.BinTestOperator) bool {
	switch op {
	case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
		return true
	}
	return false
}

// numericWord reports whether w is a literal integer, maybe signed.
func numericWord(x syntax.TestExpr, src string) bool {
	w, ok := x.(*syntax.Word)
	if !ok {
		return false
	}
	if arithLiteral(w) {
		return true
	}
	if len(w.Parts) == 1 {
		if dq, ok := w.Parts[0].(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
			if p, ok := dq.Parts[0].(*syntax.ParamExp); ok && numericParam(p) {
				return true
			}
		}
	}
	v := wordOf(w, src)
	s := strings.TrimLeft(strings.TrimSpace(v.s), "+-")
	return v.lit && s != "" && s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "[$`")
}

// varTest judges [[ -v x ]] and [[ -R x ]]: a subscript is evaluated.
func (c *collector) varTest(u *syntax.UnaryTest, src string) {
	if w, ok := u.X.(*syntax.Word); ok {
		if v := wordOf(w, src); v.lit && (isName(v.s) || isDigits(v.s)) {
			return
		}
	}
	c.runsOnlyNode(src, u, "tests a variable whose name or subscript bash evaluates as code")
}

// isWrite reports whether a redirection writes to its target: >&word
// writes to a file unless word is a file descriptor or -.
func isWrite(r *syntax.Redirect) bool {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
		return true
	case syntax.DplOut:
		l := r.Word.Lit()
		return l == "" || !(isDigits(strings.TrimSuffix(l, "-")) || l == "-")
	}
	return false
}

// gitHooks are the names git runs from a hooks directory.
var gitHooks = map[string]bool{
	"applypatch-msg": true, "pre-applypatch": true, "post-applypatch": true, "pre-commit": true,
	"pre-merge-commit": true, "prepare-commit-msg": true, "commit-msg": true, "post-commit": true,
	"pre-rebase": true, "post-checkout": true, "post-merge": true, "pre-push": true, "pre-receive": true,
	"update": true, "proc-receive": true, "post-receive": true, "post-update": true,
	"reference-transaction": true, "push-to-checkout": true, "pre-auto-gc": true, "post-rewrite": true,
	"sendemail-validate": true, "fsmonitor-watchman": true, "p4-changelist": true,
	"p4-prepare-changelist": true, "p4-post-changelist": true, "p4-pre-submit": true, "post-index-change": true,
}

// startupFiles are base names that a shell, git or another program reads
// and executes at start.
var startupFiles = map[string]bool{
	".profile": true, ".inputrc": true, ".zshrc": true, ".zshenv": true, ".zprofile": true, ".zlogin": true,
	".zlogout": true, ".kshrc": true, ".mkshrc": true, ".cshrc": true, ".tcshrc": true, ".login": true,
	".logout": true, ".envrc": true, ".gitconfig": true, ".gitattributes": true, ".gitmodules": true,
	".npmrc": true, ".yarnrc": true, ".yarnrc.yml": true, ".vimrc": true, ".exrc": true, ".gvimrc": true,
	".wgetrc": true, ".curlrc": true, ".pam_environment": true, ".xprofile": true, ".xinitrc": true,
	".xsession": true, ".tmux.conf": true, ".screenrc": true, ".pythonrc": true, ".pythonrc.py": true,
	"sitecustomize.py": true, "usercustomize.py": true, "authorized_keys": true, "authorized_keys2": true,
	"ld.so.preload": true, "config.fish": true, ".direnvrc": true, "direnvrc": true, ".lesskey": true,
}

// startupDirs are directory names whose files are executed or read as
// configuration that runs commands.
var startupDirs = map[string]bool{
	".git": true, ".ssh": true, ".husky": true, "profile.d": true, "sudoers.d": true, "cron.d": true,
	"systemd": true, "autostart": true, "hooks": true, "bashrc.d": true, ".bashrc.d": true,
}

// etcFiles are files under an etc directory that a login shell runs.
var etcFiles = map[string]bool{
	"profile": true, "bashrc": true, "bash.bashrc": true, "bash.bash_logout": true, "environment": true,
	"zshrc": true, "zshenv": true, "zprofile": true, "zlogin": true, "inputrc": true, "sudoers": true,
	"crontab": true, "gitconfig": true, "gitattributes": true, "ld.so.preload": true,
}

// sensitiveBase reports whether writing a file of this base name, in a
// directory not known, may change what a shell or git runs.
func sensitiveBase(b string) bool {
	return startupFiles[b] || strings.HasPrefix(b, ".bash") || strings.HasPrefix(b, ".zsh") ||
		strings.HasSuffix(b, ".pth") || gitHooks[b] || b == "config" || b == "attributes"
}

// sensitivePath reports whether writing to p may change what a shell or
// git runs later. The working directory is not known, so it is judged on
// the path's tail: the base name and the directories named in it.
func sensitivePath(p string) bool {
	p = strings.TrimRight(p, "/")
	b := path.Base(p)
	if startupFiles[b] || strings.HasPrefix(b, ".bash") || strings.HasPrefix(b, ".zsh") ||
		strings.HasSuffix(b, ".pth") || b == ".git" || b == ".ssh" {
		return true
	}
	dirs := strings.Split(path.Dir(p), "/")
	parent := dirs[len(dirs)-1]
	for _, d := range dirs {
		if startupDirs[d] {
			return true
		}
		if d == "etc" && (etcFiles[b] || strings.HasPrefix(b, "profile") || strings.HasPrefix(b, "bash") || strings.HasPrefix(b, "cron")) {
			return true
		}
	}
	if (b == "config" || b == "attributes") && (parent == "git" || parent == "info") {
		return true // ~/.config/git/config, info/attributes
	}
	return gitHooks[b] && parent == "."
}

// written judges a word that names a file a command writes.
func (c *collector) written(argv []word, w word) {
	if w.hidden {
		return
	}
	if w.lit && !w.glob {
		if sensitivePath(w.s) {
			c.risky(argv, "writes to "+w.s+", which a shell or git runs or reads as configuration")
		}
		return
	}
	// Only the tail after the last expansion is known. With a slash in
	// it, the base name is known.
	tail := literalTail(w.s)
	if i := strings.LastIndexByte(tail, '/'); i >= 0 && i+1 < len(tail) {
		if !sensitiveBase(tail[i+1:]) && !sensitivePath(tail) {
			return
		}
	}
	c.risky(argv, "writes to a file named only when it runs, which might be one a shell or git runs")
}

// literalTail returns what is known of the end of the file name a word
// expands to: its source after the last expansion, quotes removed.
func literalTail(s string) string {
	i := strings.LastIndexAny(s, "$`)}")
	if i < 0 {
		return ""
	}
	rest := s[i+1:]
	if s[i] == '$' {
		j := 0
		for j < len(rest) && (rest[j] == '_' || rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= 'A' && rest[j] <= 'Z' || rest[j] >= '0' && rest[j] <= '9') {
			j++
		}
		rest = rest[j:]
	}
	return strings.NewReplacer(`"`, "", "'", "", `\`, "").Replace(rest)
}

// redirect judges a redirection that writes.
func (c *collector) redirect(r *syntax.Redirect, src string) {
	if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
		// {name}>file assigns the new fd's number to name.
		name := strings.TrimSuffix(strings.TrimPrefix(r.N.Value, "{"), "}")
		switch {
		case isExecVar(name):
			c.setsVarNode(src, r, name)
		case !isName(name):
			c.runsOnlyNode(src, r, "names a variable with a subscript, which bash evaluates as code")
		}
	}
	if r.Word == nil || !isWrite(r) {
		return
	}
	w := wordOf(r.Word, src)
	c.written([]word{{s: sourceOf(src, r)}}, w)
}

// fileWriters are commands whose operands name files they write (all
// operands are judged: a source's base name may land in a destination
// directory).
var fileWriters = map[string]bool{
	"tee": true, "cp": true, "mv": true, "install": true, "ln": true, "rsync": true, "scp": true,
	"truncate": true, "link": true, "sponge": true,
}

// writtenArgs judges every operand of a command that writes files, and
// the values of its options given as --opt=value.
func (c *collector) writtenArgs(argv []word, from int) {
	n := len(c.items)
	for _, a := range argv[from:] {
		if len(c.items) > n {
			return // one finding per command is enough
		}
		if a.lit && strings.HasPrefix(a.s, "-") {
			if _, v, ok := strings.Cut(a.s, "="); ok {
				c.written(argv, word{s: v, pre: v, lit: true})
			}
			continue
		}
		c.written(argv, a)
	}
}

// historyExpands reports whether bash with history expansion on would
// change the line: a '!' that starts a history designator, outside single
// quotes, or a '^' quick substitution at the start of a line. Each line is
// expanded on its own; a line is scanned as if it starts both outside
// quotes and inside double quotes (a string continued from the previous
// line), so either reading flags it.
func historyExpands(s string) bool {
	if !strings.ContainsAny(s, "!^") {
		return false
	}
	first := true
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(line, "^") || bangIn(line, false) || !first && bangIn(line, true) {
			return true
		}
		first = false
	}
	return false
}

// bangIn scans one line for a '!' that history expansion would replace.
func bangIn(line string, dq bool) bool {
	sq := false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case sq:
			if ch == '\'' {
				sq = false
			}
		case ch == '\\':
			i++
		case ch == '\'' && !dq:
			sq = true
		case ch == '"':
			dq = !dq
		case ch == '!':
			if i+1 >= len(line) {
				continue
			}
			next := line[i+1]
			switch next {
			case ' ', '\t', '\r', '=', '(':
				continue
			case '"':
				if dq {
					continue
				}
			}
			// bash leaves $!, ${!name} and [!…] alone.
			if i >= 1 && line[i-1] == '$' ||
				i >= 2 && line[i-1] == '{' && line[i-2] == '$' ||
				i >= 1 && line[i-1] == '[' && strings.IndexByte(line[i+1:], ']') >= 0 {
				continue
			}
			return true
		}
	}
	return false
}

// safeSetLetters are set options that do not change how lines are read or
// what runs: errexit, nounset, xtrace, verbose, noglob, noclobber, and
// the same as -o names.
const safeSetLetters = "euxvfC"

var safeSetNames = map[string]bool{
	"errexit": true, "nounset": true, "xtrace": true, "verbose": true, "noglob": true,
	"noclobber": true, "pipefail": true,
}

// runsSetLetters are set options that change only which programs later
// commands run, or how words expand (allexport, notify, hashall, keyword,
// braceexpand, histexpand, physical), and the same as -o names; exec
// judging sees what they run. Others (-m, -n, -T, -E, -o vi, posix, …)
// change how the shell itself runs, traces or reads lines, and ask
// everywhere.
const runsSetLetters = "abhkBHP"

var runsSetNames = map[string]bool{
	"allexport": true, "notify": true, "hashall": true, "keyword": true, "braceexpand": true,
	"histexpand": true, "physical": true,
}

// set judges the set builtin: options that change parsing, history
// expansion, or what runs (-H, -B, -k, -T, -o vi, posix, …) ask.
func (c *collector) set(argv []word) {
	const why = "changes a shell option that changes how bash reads or runs later commands"
	runsOnly := true // every option seen changes only what runs
	defer func() {
		if !runsOnly {
			c.risky(argv, why)
		}
	}()
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			c.risky(argv, "sets shell options only known when it runs")
			return
		}
		s := a.s
		if s == "--" || s == "-" || len(s) < 2 || s[0] != '-' && s[0] != '+' {
			break // positional parameters follow
		}
		for j := 1; j < len(s); j++ {
			if s[j] != 'o' {
				switch {
				case strings.ContainsRune(safeSetLetters, rune(s[j])):
				case strings.ContainsRune(runsSetLetters, rune(s[j])):
					c.runsOnly(argv, why)
				default:
					runsOnly = false
				}
				continue
			}
			if i+1 >= len(argv) {
				runsOnly = false
				continue
			}
			i++
			switch n := argv[i]; {
			case !n.lit:
				runsOnly = false
			case safeSetNames[n.s]:
			case runsSetNames[n.s]:
				c.runsOnly(argv, why)
			default:
				runsOnly = false
			}
		}
	}
}

// shellBuiltins are builtins that change how later lines are read or what
// a name runs, so a line that looks harmless next can run anything.
var shellBuiltins = map[string]string{
	"shopt":    "changes shell options that change how bash reads or runs later commands",
	"enable":   "enables, disables or loads builtins, which changes what a name runs",
	"hash":     "changes which program a command name runs",
	"alias":    "defines an alias, which changes what a command name runs",
	"unalias":  "removes an alias",
	"bind":     "binds keys to shell commands",
	"complete": "installs completion, which can run commands",
	"compgen":  "expands words and runs completion functions and commands",
	"fc":       "runs commands from the history",
	"trap":     "installs a handler that runs later, on a signal or at every command",
}

// builtins judges the builtins that assign by name or evaluate their
// arguments. It reports whether name is one of shellBuiltins, which are
// judged here entirely.
func (c *collector) builtins(name string, argv []word, depth int) bool {
	if d, ok := shellBuiltins[name]; ok {
		if name == "alias" {
			c.runsOnly(argv, d) // its value is judged below, and what it runs at exec
		} else {
			c.risky(argv, d)
		}
		switch name {
		case "trap":
			c.trap(argv, depth)
		case "shopt":
			c.comments = true
		case "alias":
			// alias name='rm -rf ~': judge what the name will run.
			for _, a := range argv[1:] {
				if _, v, ok := strings.Cut(a.s, "="); ok && a.lit {
					c.nested(argv, word{s: v, pre: v, lit: true}, depth)
				}
			}
		}
		if name == "hash" {
			// hash -p PATH NAME makes NAME run PATH: judge PATH too.
			for i := 1; i < len(argv); i++ {
				a := argv[i]
				if !a.lit || !strings.HasPrefix(a.s, "-") {
					break
				}
				if j := strings.IndexByte(a.s, 'p'); j > 0 {
					p := word{s: a.s[j+1:], pre: a.s[j+1:], lit: true}
					if p.s == "" && i+1 < len(argv) {
						p = argv[i+1]
					}
					if p.s != "" {
						c.add(item{argv: []word{p}})
					}
					break
				}
			}
		}
		return true
	}
	switch name {
	case "set":
		c.set(argv)
		return false
	case "printf":
		for i := 1; i < len(argv); i++ {
			a := argv[i]
			if !a.lit {
				if !strings.HasPrefix(a.pre, "-") && a.pre != "" {
					return false
				}
				c.risky(argv, "has an option only known when it runs")
				return false
			}
			switch {
			case a.s == "--":
				return false
			case a.s == "-v" && i+1 < len(argv):
				c.target(argv, argv[i+1])
				return false
			case strings.HasPrefix(a.s, "-v"):
				c.target(argv, word{s: a.s[2:], pre: a.s[2:], lit: true})
				return false
			case !strings.HasPrefix(a.s, "-"):
				return false
			}
		}
	case "read", "mapfile", "readarray", "getopts", "wait", "unset":
		c.nameArgs(name, argv)
	case "test", "[":
		for _, a := range argv[1:] {
			if a.lit && (a.s == "-v" || a.s == "-R") {
				c.runsOnly(argv, "tests a variable whose name or subscript bash evaluates as code")
				break
			}
		}
	case "let":
		// let is parsed as a LetClause; reached only through a wrapper
		// (builtin let …), whose words are not parsed as arithmetic.
		c.runsOnly(argv, "evaluates its arguments as arithmetic, which can run commands")
	}
	return false
}

// nameArgs judges builtins whose operands are variable names (read,
// mapfile, getopts, wait -p, unset). Option values that are names are
// judged too; mapfile -C runs a callback.
func (c *collector) nameArgs(name string, argv []word) {
	var vals string
	switch name {
	case "read":
		vals = "adinNptu"
	case "mapfile", "readarray":
		vals = "dnOsuCc"
	case "wait":
		vals = "p"
	case "unset", "getopts":
	}
	names := argv[1:]
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if a.pre != "" && a.pre[0] == '-' || a.pre == "" {
				c.risky(argv, "has an option or a variable name only known when it runs")
				return
			}
			names = argv[i:]
			break
		}
		s := a.s
		if s == "--" {
			names = argv[i+1:]
			break
		}
		if len(s) < 2 || s[0] != '-' {
			names = argv[i:]
			break
		}
		names = argv[i+1:]
		for j := 1; j < len(s); j++ {
			ch := s[j]
			if !strings.ContainsRune(vals, rune(ch)) {
				continue
			}
			var v word
			if j+1 < len(s) {
				v = word{s: s[j+1:], pre: s[j+1:], lit: true}
			} else if i+1 < len(argv) {
				i++
				v = argv[i]
				names = argv[i+1:]
			}
			switch {
			case ch == 'C':
				c.risky(argv, "runs a callback for the lines it reads")
				return
			case ch == 'a' || ch == 'p' && name == "wait":
				c.target(argv, v)
			}
			break
		}
	}
	if name == "wait" {
		// wait's operands are process ids and job specs (%1, %+), which
		// bash reads as such and never as a name or arithmetic; only -p
		// assigns.
		return
	}
	if name == "getopts" && len(names) > 1 {
		names = names[1:2]
	}
	for _, n := range names {
		if name == "unset" && n.lit && !strings.ContainsAny(n.s, "[]") {
			continue // unsetting a plain name runs nothing
		}
		c.target(argv, n)
	}
}

// gitCodeOpts are git subcommand options that run a program or a script
// they are given.
var gitCodeOpts = map[string][]string{
	"grep":          {"-O", "--open-files-in-pager"},
	"rebase":        {"-x", "--exec"},
	"difftool":      {"-x", "--extcmd"},
	"mergetool":     {"--tool"},
	"clone":         {"-u", "--upload-pack", "--template", "-c", "--config"},
	"fetch":         {"--upload-pack"},
	"pull":          {"--upload-pack"},
	"push":          {"--receive-pack", "--exec"},
	"ls-remote":     {"--upload-pack", "--exec"},
	"archive":       {"--exec"},
	"submodule":     {"foreach"},
	"bisect":        {"run"},
	"filter-branch": {"--tree-filter", "--index-filter", "--msg-filter", "--env-filter", "--commit-filter", "--parent-filter", "--tag-name-filter"},
	"send-email":    {"--to-cmd", "--cc-cmd", "--header-cmd", "--smtp-server", "--sendmail-cmd"},
	"init":          {"--template"},
	"config":        nil,
}

// gitGlobalVals are git's global options that take the next word.
var gitGlobalVals = map[string]bool{"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true, "--config-env": true, "--super-prefix": true, "--list-cmds": true, "--attr-source": true}

// git judges a git command: -c, --config-env and --exec-path make git run
// what they name (an alias.x=!cmd is parsed and judged as a script);
// config writes configuration; some subcommand options run programs.
func (c *collector) git(argv []word, depth int) {
	i := 1
	for ; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			c.risky(argv, "has a global option only known when it runs")
			return
		}
		s := a.s
		if !strings.HasPrefix(s, "-") {
			break
		}
		name, val, hasVal := strings.Cut(s, "=")
		switch {
		case name == "-c" || name == "--config-env" || strings.HasPrefix(s, "-c") && len(s) > 2:
			v := val
			if name == "-c" && !hasVal && len(s) == 2 {
				if i+1 < len(argv) {
					i++
					v = argv[i].s
					if !argv[i].lit {
						c.risky(argv, "sets git configuration only known when it runs")
						continue
					}
				}
			} else if strings.HasPrefix(s, "-c") && s != "-c" {
				v = s[2:]
			}
			c.risky(argv, "sets git configuration (-c), which can make git run any program")
			key, script, _ := strings.Cut(v, "=")
			if strings.HasPrefix(strings.ToLower(key), "alias.") && strings.HasPrefix(script, "!") {
				c.nested(argv, word{s: script[1:], pre: script[1:], lit: true}, depth)
			}
		case name == "--exec-path" && hasVal:
			c.risky(argv, "runs git's programs from another directory (--exec-path)")
		case name == "--git-dir":
			c.risky(argv, "uses another repository's configuration and hooks (--git-dir)")
			if !hasVal {
				i++
			}
		case gitGlobalVals[name] && !hasVal:
			i++
		}
	}
	if i >= len(argv) {
		return
	}
	sub := argv[i]
	if !sub.lit {
		return
	}
	if sub.s == "config" {
		c.gitConfig(argv, i+1)
	}
	for j := i + 1; j < len(argv); j++ {
		a := argv[j]
		name, v, ok := strings.Cut(a.pre, "=")
		if name == "--output" || name == "-o" && sub.s == "format-patch" {
			if ok {
				if a.lit {
					c.written(argv, word{s: v, pre: v, lit: true})
				} else {
					_, tail, _ := strings.Cut(a.s, "=")
					c.written(argv, word{s: tail, pre: v})
				}
			} else if j+1 < len(argv) {
				c.written(argv, argv[j+1])
			}
		}
		if !a.lit {
			continue
		}
		for _, o := range gitCodeOpts[sub.s] {
			if name == o || len(o) == 2 && strings.HasPrefix(a.s, o) {
				c.risky(argv, "uses "+o+", which makes git run a program or script it names")
				return
			}
		}
	}
}

// gitConfig judges git config: reading (get, list, one key) is fine;
// anything else writes configuration, which can make git run programs.
func (c *collector) gitConfig(argv []word, from int) {
	positional := 0
	for _, a := range argv[from:] {
		if !a.lit {
			positional++
			continue
		}
		switch {
		case a.s == "get" || a.s == "list" || a.s == "--get" || a.s == "--get-all" || a.s == "--get-regexp" ||
			a.s == "--list" || a.s == "-l" || a.s == "--get-urlmatch" || a.s == "--get-color" || a.s == "--get-colorbool":
			return
		case strings.HasPrefix(a.s, "-"):
		default:
			positional++
		}
	}
	if positional >= 2 || positional == 0 {
		c.runsOnly(argv, "writes git configuration, which can make git run any program")
	}
}

// codeOpts are options of common commands that make them run a program
// or a command line they are given. A short option matches attached too.
var codeOpts = map[string][]string{
	"sort":    {"--compress-program"},
	"rg":      {"--pre"},
	"tar":     {"--to-command", "--checkpoint-action", "--use-compress-program", "-I", "--info-script", "--new-volume-script", "-F", "--rsh-command", "--rmt-command"},
	"zip":     {"-TT", "--unzip-command"},
	"rsync":   {"-e", "--rsh", "--rsync-path"},
	"ssh":     {"-F"},
	"scp":     {"-S", "-F"},
	"sftp":    {"-S", "-F", "-D"},
	"man":     {"-P", "--pager", "-H", "--html"},
	"less":    {"--lesskey-src", "--lesskey-file"},
	"wget":    {"--use-askpass", "-e", "--execute"},
	"curl":    {"-K", "--config"},
	"tcpdump": {"-z"},
	"vim":     {"-c", "--cmd", "-S"},
	"vi":      {"-c", "--cmd", "-S"},
	"nvim":    {"-c", "--cmd", "-S"},
	"fd":      {"-x", "--exec", "-X", "--exec-batch"},
	"gdb":     {"-ex", "-x", "-iex", "-ix", "--eval-command", "--command", "--init-command", "--init-eval-command"},
	"strace":  {"-o|", "-o!"},
}

// outputOpts are options of common commands whose value names a file
// (or, for tar -C and unzip -d, a directory) the command writes.
var outputOpts = map[string][]string{
	"sort":  {"-o", "--output"},
	"shuf":  {"-o", "--output"},
	"curl":  {"-o", "--output"},
	"wget":  {"-O", "--output-document", "-P", "--directory-prefix"},
	"patch": {"-o", "--output"},
	"tar":   {"-C", "--directory"},
	"unzip": {"-d"},
	"perl":  {"-i"},
}

// outputOptions judges the file or directory an output option names.
func (c *collector) outputOptions(name string, argv []word) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			continue
		}
		for _, o := range outputOpts[name] {
			switch {
			case name == "perl" && strings.HasPrefix(a.s, "-i"):
				// perl -i edits every file operand in place.
				c.writtenArgs(argv, i+1)
				return
			case a.s == o && i+1 < len(argv):
				c.written(argv, argv[i+1])
			case strings.HasPrefix(a.s, o+"="):
				c.written(argv, word{s: a.s[len(o)+1:], pre: a.s[len(o)+1:], lit: true})
			case len(o) == 2 && len(a.s) > 2 && strings.HasPrefix(a.s, o) && a.s[1] != '-':
				c.written(argv, word{s: a.s[2:], pre: a.s[2:], lit: true})
			}
		}
	}
}

// envValueOpts are wrapper options whose value is a NAME=VALUE put in the
// environment of the command the wrapper runs.
var envValueOpts = map[string][]string{
	"systemd-run": {"-E", "--setenv"},
	"strace":      {"-E", "--env"},
	"firejail":    {"--env"},
}

// envOptions judges the NAME=VALUE values of a wrapper's envValueOpts.
func (c *collector) envOptions(name string, argv []word) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			continue
		}
		for _, o := range envValueOpts[name] {
			switch {
			case a.s == o && i+1 < len(argv):
				if !argv[i+1].lit {
					c.risky(argv, "sets an environment variable only known when it runs")
					return
				}
				c.envVar(argv, argv[i+1].s)
			case strings.HasPrefix(a.s, o+"="):
				c.envVar(argv, a.s[len(o)+1:])
			case len(o) == 2 && len(a.s) > 2 && strings.HasPrefix(a.s, o) && a.s[1] != '-':
				c.envVar(argv, a.s[2:])
			}
		}
	}
}

// sshCodeOpts are ssh -o keys that run a local command.
var sshCodeOpts = []string{"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match", "include"}

// codeOptions judges the options in codeOpts, ssh -o keys, and the sed
// commands that run or write (e, w, W), for the named command.
func (c *collector) codeOptions(name string, argv []word) {
	if strings.HasPrefix(name, "vim") || name == "view" {
		name = "vim"
	}
	for i, a := range argv[1:] {
		if !a.lit {
			continue
		}
		s := a.s
		for _, o := range codeOpts[name] {
			if strings.HasSuffix(o, "|") || strings.HasSuffix(o, "!") {
				opt, ch := o[:2], o[2]
				if s == opt && i+2 < len(argv) && strings.HasPrefix(argv[i+2].s, string(ch)) ||
					strings.HasPrefix(s, opt+string(ch)) {
					c.risky(argv, "pipes its output to a command ("+s+")")
					return
				}
				continue
			}
			if s == o || strings.HasPrefix(s, o+"=") || len(o) == 2 && strings.HasPrefix(s, o) && !strings.HasPrefix(s, "--") ||
				name == "vim" && strings.HasPrefix(s, "+") {
				c.risky(argv, "uses "+o+", which makes "+name+" run a program or command it is given")
				return
			}
		}
		if (name == "ssh" || name == "scp" || name == "sftp" || name == "rsync") && strings.HasPrefix(s, "-o") {
			v := strings.TrimPrefix(s, "-o")
			if v == "" && i+2 < len(argv) {
				v = argv[i+2].s
			}
			v = strings.ToLower(strings.TrimSpace(v))
			for _, k := range sshCodeOpts {
				if strings.HasPrefix(v, k) {
					c.risky(argv, "sets ssh's "+k+", which runs a local command")
					return
				}
			}
		}
		if name == "rsync" && strings.Contains(s, "ProxyCommand") {
			c.risky(argv, "sets ssh's ProxyCommand, which runs a local command")
			return
		}
	}
	if name == "sed" || name == "gsed" {
		c.sed(argv)
	}
}

// sedRuns matches the sed commands and s/// flags that run a command (e)
// or write a file (w, W) in a sed script; it errs towards matching.
var sedRuns = regexp.MustCompile(`(^|[;{}\n!$0-9,/IM]|^\s*)\s*[ewW](\s|;|}|$)|/[gpiImM0-9]*[ewW][gpiImM0-9]*(\s|;|}|$)`)

// sed judges sed: -i writes every file operand, and scripts with e, w or
// W run commands or write files; a script from a file (-f) is not known.
func (c *collector) sed(argv []word) {
	inPlace, script, operands := false, false, false
	var files []word
	judge := func(w word) bool {
		script = true
		switch {
		case !w.lit:
			c.risky(argv, "has a script only known when it runs")
		case sedRuns.MatchString(w.s):
			c.risky(argv, "has a sed script that may run a command or write a file (e, w)")
		default:
			return true
		}
		return false
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		s := a.s
		switch {
		case operands || !a.lit && !strings.HasPrefix(a.pre, "-") || a.lit && (s == "-" || !strings.HasPrefix(s, "-")):
			if !script {
				if !judge(a) {
					return
				}
				continue
			}
			files = append(files, a)
		case !a.lit:
			c.risky(argv, "has an option only known when it runs")
			return
		case s == "--":
			operands = true
		case strings.HasPrefix(s, "--"):
			name, val, hasVal := strings.Cut(s[2:], "=")
			switch name {
			case "file":
				c.risky(argv, "runs a sed script from a file, which may run commands")
				return
			case "expression":
				w := word{s: val, pre: val, lit: true}
				if !hasVal {
					if i+1 >= len(argv) {
						return
					}
					i++
					w = argv[i]
				}
				if !judge(w) {
					return
				}
			case "in-place":
				inPlace = true
			case "line-length":
				if !hasVal {
					i++
				}
			}
		default:
			// A bundle of short options: e and f take the rest or the
			// next word, i and l the rest.
			for j := 1; j < len(s); j++ {
				ch := s[j]
				if ch == 'i' {
					inPlace = true
					break
				}
				if ch == 'l' {
					if j+1 == len(s) {
						i++
					}
					break
				}
				if ch != 'e' && ch != 'f' {
					continue
				}
				if ch == 'f' {
					c.risky(argv, "runs a sed script from a file, which may run commands")
					return
				}
				w := word{s: s[j+1:], pre: s[j+1:], lit: true}
				if j+1 == len(s) {
					if i+1 >= len(argv) {
						return
					}
					i++
					w = argv[i]
				}
				if !judge(w) {
					return
				}
				break
			}
		}
	}
	if inPlace {
		for _, f := range files {
			c.written(argv, f)
		}
	}
}

// commentFree rewrites src so each comment's '#' is an escaped, literal
// '#': what bash reads once interactive_comments is off.
func commentFree(src string) (string, bool) {
	p := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true))
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		return "", false
	}
	var offs []uint
	syntax.Walk(f, func(n syntax.Node) bool {
		if cm, ok := n.(*syntax.Comment); ok {
			offs = append(offs, cm.Hash.Offset())
		}
		return true
	})
	if len(offs) == 0 {
		return "", false
	}
	var b strings.Builder
	last := uint(0)
	for _, o := range offs {
		if o < last || o >= uint(len(src)) {
			continue
		}
		b.WriteString(src[last:o])
		b.WriteByte('\\')
		last = o
	}
	b.WriteString(src[last:])
	return b.String(), true
}
