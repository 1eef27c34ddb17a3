package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// This file holds what a line may leave to exec judging. A sandboxed
// local session judges every program its shell starts, by its exact argv,
// with the same command rules (DecideExec). There, a line whose only risk
// is that the line's judge cannot see which programs it runs (a sourced
// file, eval, a shell option, PATH, an alias, arithmetic on variables, git
// configuration, a history designator) cannot beat a rule that exec
// judging enforces: whatever it runs, it runs as a program, and the
// program is judged as it starts. It can beat only a rule that no exec
// enforces, one that names a builtin or keyword (cd, kill, echo, exec, a
// glob such as *), so with such a rule it asks as before.
//
// What stays asked everywhere, because no exec shows it: writes to files a
// shell or git runs (a redirection target, tee, cp, …), which the person's
// own later commands would run unjudged; builtins that change what a name
// or a key runs at the prompt, or what runs between commands (enable,
// hash, trap, bind, complete, shopt, fc, unalias, PROMPT_COMMAND and
// PS0–PS4); a word bash reads as a variable name only known when it runs;
// and a line that does not parse.

// runsOnly adds an item that asks only because the line's judge cannot see
// which programs it runs: exec judging may take its place.
func (c *collector) runsOnly(argv []word, detail string) {
	c.add(item{argv: argv, why: whyShell, detail: detail, extra: true, runs: true})
}

// runsOnlyNode adds a runsOnly item for a node, shown as written.
func (c *collector) runsOnlyNode(src string, n syntax.Node, detail string) {
	c.runsOnly([]word{{s: sourceOf(src, n)}}, detail)
}

// setsVar adds the item for an assignment to a variable in execVars: one
// the shell runs at its prompt asks everywhere, since what it runs runs
// between commands, when no agent command is there to own it; any other
// only changes which programs run.
func (c *collector) setsVar(argv []word, name string) {
	if promptVars[name] {
		c.risky(argv, "sets "+name+", which the shell or a program executes")
		return
	}
	c.runsOnly(argv, "sets "+name+", which the shell or a program executes")
}

// setsVarNode is setsVar for a node, shown as written.
func (c *collector) setsVarNode(src string, n syntax.Node, name string) {
	c.setsVar([]word{{s: sourceOf(src, n)}}, name)
}

// promptVars are the variables whose value bash runs or expands at every
// prompt.
var promptVars = map[string]bool{
	"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS2": true, "PS3": true, "PS4": true,
}

// shellNames are bash's builtins and reserved words: a program run under
// one of these names is not exec'd, so no exec judging sees it.
var shellNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`. : [ [[ ]] { } ! alias bg bind break builtin caller case cd command
		compgen complete compopt continue coproc declare dirs disown do done echo elif else enable esac eval
		exec exit export false fc fg fi for function getopts hash help history if in jobs kill let local logout
		mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source suspend
		test then time times trap true type typeset ulimit umask unalias unset until wait while`) {
		m[n] = true
	}
	return m
}()

// execEnforced reports whether exec judging enforces every rule that
// could refuse or hold a command of tool: each such command rule names,
// as its command word, a program and never a builtin or keyword (by name,
// by base name, or by a glob that matches one). A tool-only rule judges
// the line itself, whatever it runs, so it does not count.
func (p *Policy) execEnforced(tool string) bool {
	for i := range p.rules {
		r := &p.rules[i]
		if r.pat == nil || r.dec == Allow || (r.tool != "" && r.tool != tool) {
			continue
		}
		w := &r.pat[0]
		if w.run {
			return false // `* x` matches any command word
		}
		for n := range shellNames {
			if matchCommandWord(w, n) {
				return false
			}
		}
		if w.glob == nil && shellNames[path.Base(w.lit)] {
			return false
		}
	}
	return true
}
