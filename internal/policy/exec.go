package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Exec is one program a session's process is about to start, judged on
// its own (see DecideExec).
type Exec struct {
	// Tool is the tool whose rules apply, e.g. "ssh_exec".
	Tool string
	// Path is the file the kernel is asked to run; Resolved is the same
	// with symlinks resolved, when known.
	Path, Resolved string
	// Argv is the argument vector as the program receives it.
	Argv []string
	// Truncated says Argv holds only the first words of a longer one.
	Truncated bool
	// Look, when set, says what the file at a path is, as the process
	// that execs sees it: the path with symlinks resolved, and its #!
	// interpreter and optional argument if it is a script. DecideExec asks
	// it about Path (unless Resolved is set), about each interpreter, and
	// about a program the dynamic loader is asked to run. An error fails
	// the exec closed.
	Look func(path string) (resolved string, shebang []string, err error)
}

// maxInterpreters is how many #! interpreters the kernel follows for one
// exec (more fail with ELOOP); maxLoaders bounds loaders run by loaders.
const (
	maxInterpreters = 5
	maxLoaders      = 4
)

// form is one argv an exec is judged as, with the names its program goes
// by, each tried as the command word.
type form struct {
	argv  []string
	heads []string
}

// forms lists what an exec runs, as the kernel and the loader run it:
// the argv itself; for a #! script, [interpreter, its argument, the
// script, argv[1:]…], and so on for an interpreter that is a script;
// for the dynamic loader, the program it loads with that program's
// arguments; and for a multi-call program (git-<sub>, busybox), the
// command its name or first argument says.
func (e Exec) forms() ([]form, error) {
	var out []form
	add := func(argv []string, heads ...string) {
		f := form{argv: argv}
		for _, h := range heads {
			if h != "" && !slices.Contains(f.heads, h) {
				f.heads = append(f.heads, h)
			}
		}
		out = append(out, f)
	}
	look := func(p string) (string, []string, error) {
		if e.Look == nil {
			return "", nil, nil
		}
		r, sh, err := e.Look(p)
		if err != nil {
			return "", nil, fmt.Errorf("what %s runs cannot be known: %w", quoteShort(p), err)
		}
		return r, sh, nil
	}
	argv := e.Argv
	if len(argv) == 0 {
		argv = []string{""}
	}
	path, resolved, shebang := e.Path, e.Resolved, []string(nil)
	if resolved == "" {
		var err error
		if resolved, shebang, err = look(path); err != nil {
			return nil, err
		}
	}
	add(argv, argv[0], path, resolved)
	for depth := 0; shebang != nil && depth < maxInterpreters; depth++ {
		// The kernel starts the interpreter with the script's path in
		// place of argv[0] (fs/binfmt_script.c).
		next := append(append(slices.Clone(shebang), path), argv[1:]...)
		r, sh, err := look(shebang[0])
		if err != nil {
			return nil, err
		}
		argv, path, shebang = next, shebang[0], sh
		add(argv, argv[0], r)
	}
	for range maxLoaders {
		last := out[len(out)-1]
		if !slices.ContainsFunc(last.heads, isLoader) {
			break
		}
		k, argv0, run, known := loaderArgs(literal(last.argv))
		if !known {
			return nil, fmt.Errorf("%s: the dynamic loader's options are not all known, so the program it runs is not", quoteShort(strings.Join(last.argv, " ")))
		}
		if !run {
			break
		}
		prog := last.argv[k]
		r, _, err := look(prog)
		if err != nil {
			return nil, err
		}
		next := slices.Clone(last.argv[k:])
		if argv0 != nil {
			next[0] = argv0.s
		}
		add(next, next[0], prog, r)
	}
	for _, f := range slices.Clone(out) {
		for _, h := range f.heads {
			w := literal(f.argv)
			w[0] = word{s: h, pre: h, lit: true}
			if mc, ok := multiCall(w); ok && len(out) < 64 {
				argv := make([]string, len(mc))
				for i, x := range mc {
					argv[i] = x.s
				}
				add(argv, argv[0])
			}
		}
	}
	return out, nil
}

// literal makes argv words that are exactly what the program receives.
func literal(argv []string) []word {
	w := make([]word, len(argv))
	for i, a := range argv {
		w[i] = word{s: a, pre: a, lit: true}
	}
	return w
}

// DecideExec judges one exec against the command rules, without parsing:
// every word is exactly what the program receives. It judges what the
// exec runs (see Exec.Look): the argv; for a #! script its interpreter
// with the interpreter's argument, the script and the arguments; for the
// dynamic loader the program it loads; for a multi-call program the
// command it is run as. The command word of each is tried as argv[0], as
// the path and as the resolved path (a renamed argv[0] or a symlink does
// not hide rm), and the strictest rule that matches any of them decides.
// An argv cut short matches the way a word unknown until run time does:
// a rule that might match asks. Verdict.Commands lists every argv judged.
//
// Only command rules count, not the mode nor tool rules: the command line
// that started the program was judged already, with those. With no rule
// matching, the verdict is Allow with an empty Rule. An exec whose
// program cannot be looked at (Look fails) is denied as unjudgeable.
func (p *Policy) DecideExec(e Exec) Verdict {
	if p == nil {
		return Verdict{Decision: Allow, Reason: "no policy"}
	}
	forms, err := e.forms()
	if err != nil {
		return Verdict{Decision: Deny, Rule: unjudgeable, Reason: quoteExec(e) + ": " + err.Error(), Commands: [][]string{e.Argv}}
	}
	var m matcher
	var best *rule
	var how match
	var bestForm *form
	commands := make([][]string, 0, len(forms))
	for i := range forms {
		f := &forms[i]
		commands = append(commands, f.argv)
		words := literal(f.argv)
		if e.Truncated {
			words = append(words, word{hidden: true})
		}
		for _, h := range f.heads {
			words[0] = word{s: h, pre: h, lit: true}
			for i := range p.rules {
				r := &p.rules[i]
				if r.pat == nil || (r.tool != "" && r.tool != e.Tool) {
					continue
				}
				res := m.match(r.pat, words)
				if res == noMatch || (res == mayMatch && r.dec == Allow) {
					continue
				}
				if best == nil || effective(r.dec, res) > effective(best.dec, how) {
					best, how, bestForm = r, res, f
				}
			}
		}
	}
	shown := quoteExec(e)
	if bestForm != nil && bestForm != &forms[0] {
		shown = quoteExec(Exec{Argv: bestForm.argv, Truncated: e.Truncated}) + " (what " + shown + " runs)"
	}
	switch {
	case best == nil:
		return Verdict{Decision: Allow, Reason: shown + " matches no command rule", Commands: commands}
	case how == mayMatch:
		return Verdict{Decision: effective(best.dec, how), Rule: best.text, Commands: commands, Reason: fmt.Sprintf(
			"%s might match %s (%s): its arguments were too long to read whole", shown, best.ref, best.dec)}
	}
	return Verdict{Decision: best.dec, Rule: best.text, Commands: commands, Reason: fmt.Sprintf("%s matches %s (%s)", shown, best.ref, best.dec)}
}

// effective is a rule's decision given how sure the match is: a deny that
// might match asks.
func effective(d Decision, how match) Decision {
	if how == mayMatch && d > Ask {
		return Ask
	}
	return d
}

// JudgesExecs reports whether some command rule can refuse or hold a
// program (deny, ask or forward): only then must a local session judge its
// execs, and only then is a kernel that cannot a reason to refuse one.
func (p *Policy) JudgesExecs() bool {
	if p == nil {
		return false
	}
	for _, r := range p.rules {
		if r.pat != nil && r.dec > Allow {
			return true
		}
	}
	return false
}

// quoteExec shows an exec's argv as a shell would quote it.
func quoteExec(e Exec) string {
	w := make([]word, 0, len(e.Argv))
	for _, a := range e.Argv {
		w = append(w, word{s: a, pre: a, lit: true})
	}
	s := quoteArgv(w)
	if e.Truncated {
		s += " …"
	}
	return s
}

// JudgedArgv lists the programs a command line starts as its judge saw
// them whole: the argv of every simple command in it (a wrapper's own
// argv included) whose words are all literal, so that each is exactly
// what the program receives. The line was judged with these argv before
// it ran (and a human approved it where a rule asked), so an exec with one
// of them, started by that line, need not be judged again. A line the
// parser cannot read lists nothing.
func (p *Policy) JudgedArgv(line string) [][]string {
	if p == nil || len(line) > maxCommandBytes || tooDeep(line) {
		return nil
	}
	parser := p.parser()
	defer p.parsers.Put(parser)
	c := collector{parser: parser}
	if err := c.script(line, 0); err != nil {
		return nil
	}
	var out [][]string
	for _, it := range c.items {
		if it.extra || it.why != judgeable || len(it.argv) == 0 {
			continue
		}
		argv := make([]string, 0, len(it.argv))
		for _, w := range it.argv {
			if !w.lit || w.glob || w.hidden {
				argv = nil
				break
			}
			argv = append(argv, w.s)
		}
		if argv != nil {
			out = append(out, argv)
		}
	}
	return out
}
