package policy

import (
	"fmt"
	"slices"
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
}

// DecideExec judges one exec against the command rules, without parsing:
// every word is exactly what the program receives. The command word is
// tried as argv[0], as the path and as the resolved path (a renamed
// argv[0] or a symlink does not hide rm), and the strictest rule that
// matches any of them decides. An argv cut short matches the way a word
// unknown until run time does: a rule that might match asks.
//
// Only command rules count, not the mode nor tool rules: the command line
// that started the program was judged already, with those. With no rule
// matching, the verdict is Allow with an empty Rule.
func (p *Policy) DecideExec(e Exec) Verdict {
	if p == nil {
		return Verdict{Decision: Allow, Reason: "no policy"}
	}
	words := make([]word, 0, len(e.Argv)+1)
	for _, a := range e.Argv {
		words = append(words, word{s: a, pre: a, lit: true})
	}
	if e.Truncated {
		words = append(words, word{hidden: true})
	}
	if len(words) == 0 {
		words = append(words, word{s: "", lit: true})
	}
	heads := []string{words[0].s}
	for _, h := range []string{e.Path, e.Resolved} {
		if h != "" && !slices.Contains(heads, h) {
			heads = append(heads, h)
		}
	}
	var m matcher
	var best *rule
	var how match
	for _, h := range heads {
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
			dec := r.dec
			if res == mayMatch && dec > Ask {
				dec = Ask
			}
			if best == nil || dec > effective(best.dec, how) {
				best, how = r, res
			}
		}
	}
	shown := quoteExec(e)
	switch {
	case best == nil:
		return Verdict{Decision: Allow, Reason: shown + " matches no command rule"}
	case how == mayMatch:
		return Verdict{Decision: effective(best.dec, how), Rule: best.text, Reason: fmt.Sprintf(
			"%s might match %s (%s): its arguments were too long to read whole", shown, best.ref, best.dec)}
	}
	return Verdict{Decision: best.dec, Rule: best.text, Reason: fmt.Sprintf("%s matches %s (%s)", shown, best.ref, best.dec)}
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
