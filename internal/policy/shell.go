package policy

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

const (
	// maxCommandBytes bounds the work for one decision; longer commands
	// fail closed.
	maxCommandBytes = 256 << 10
	// maxDepth is how deeply scripts may nest (bash -c 'bash -c …', trap
	// handlers) before we stop parsing and fail closed.
	maxDepth = 8
	// maxWrappers is how many wrappers (sudo env nice …) one simple
	// command may stack before we fail closed.
	maxWrappers = 16
	// maxSplits is how many env -S strings one env may expand.
	maxSplits = 8
	// maxParens bounds how deeply parentheses may nest; the parser's work
	// grows faster than linearly with it, and real commands stay shallow.
	maxParens = 256
)

// tooDeep reports whether s opens more than maxParens parentheses that are
// not yet closed, quoted or not, at some point.
func tooDeep(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if depth++; depth > maxParens {
				return true
			}
		case ')':
			depth = max(depth-1, 0)
		}
	}
	return false
}

// word is one argv word as the policy sees it.
type word struct {
	s      string // the word after quote removal if lit, else its source text
	pre    string // the literal text before the first expansion (s if lit)
	lit    bool   // s is exactly what the command receives
	glob   bool   // has unquoted glob characters (*, ?, [...]) that bash may expand
	hidden bool   // stands for arguments only known at run time (xargs input); never shown
}

// item is one thing to judge: a simple command, or a wrapper around one.
type item struct {
	argv []word
	// wrapper marks the argv of a wrapper (sudo, env, bash -c, …) whose
	// wrapped command is judged as its own item. A wrapper item is matched
	// against rules only to make the decision stricter: the mode does not
	// apply to it and it is not listed in Verdict.Commands.
	wrapper bool
	// extra marks an item that only says why something else in the line
	// is not what it seems (an assignment, an expansion, a builtin's
	// effect); it is judged but not listed in Verdict.Commands.
	extra  bool
	why    why    // why the item cannot be judged statically, if it cannot
	detail string // more about why, for some reasons
	// runs marks an item that cannot be judged only because the line's
	// judge cannot see which programs it runs: where exec judging
	// enforces every rule that could refuse it, it need not ask
	// (execseen.go).
	runs bool
}

// why is a reason an item cannot be judged statically. Messages are built
// only for the item that decides, by explain.
type why uint8

const (
	judgeable why = iota
	whyNotLiteral
	whyFromInput
	whyGlob
	whyExtGlob
	whyEval
	whySource
	whyWrappers
	whyWrapped
	whyScriptNotLiteral
	whyDepth
	whyParens
	whyParse
	whyShell
)

// explain says in one sentence why the item cannot be judged.
func (it *item) explain() string {
	cmd := quoteArgv(it.argv)
	switch it.why {
	case whyNotLiteral:
		return fmt.Sprintf("%s is not a literal command word, so it cannot be judged before it runs", quoteShort(it.argv[0].s))
	case whyFromInput:
		return fmt.Sprintf("%s takes the command to run from its input, so it cannot be judged before it runs", cmd)
	case whyGlob:
		return fmt.Sprintf("%s is a glob pattern, so the command it names cannot be judged before it runs", quoteShort(it.argv[0].s))
	case whyExtGlob:
		return fmt.Sprintf("%s is an extended glob with a substitution inside, so it cannot be judged before it runs", cmd)
	case whyEval:
		return fmt.Sprintf("%s evaluates its arguments as shell code, so it cannot be judged before it runs", cmd)
	case whySource:
		return fmt.Sprintf("%s runs the code in a file, so it cannot be judged before it runs", cmd)
	case whyWrappers:
		return fmt.Sprintf("%s stacks more than %d wrappers, so it is not judged", cmd, maxWrappers)
	case whyWrapped:
		return fmt.Sprintf("%s runs a command that is not known before it runs (%s)", cmd, it.detail)
	case whyScriptNotLiteral:
		return fmt.Sprintf("the script that %s runs is not a literal, so it cannot be judged before it runs", cmd)
	case whyDepth:
		return fmt.Sprintf("%s nests scripts more than %d deep, so it is not judged", cmd, maxDepth)
	case whyParens:
		return fmt.Sprintf("the script that %s runs nests parentheses more than %d deep, so it is not judged", cmd, maxParens)
	case whyParse:
		return fmt.Sprintf("parse error: in the script that %s runs: %s", cmd, it.detail)
	case whyShell:
		return fmt.Sprintf("%s %s, so it is not allowed unwatched", cmd, it.detail)
	}
	return cmd + " can be judged"
}

// visible returns the argv as shown in Verdict.Commands.
func (it *item) visible() []string {
	out := make([]string, 0, len(it.argv))
	for _, w := range it.argv {
		if !w.hidden {
			out = append(out, w.s)
		}
	}
	return out
}

// collector walks parsed shell code and gathers the items to judge.
type collector struct {
	parser *syntax.Parser
	items  []item
	// comments is set when the line may turn interactive_comments off,
	// so that what follows a '#' is judged too.
	comments bool
	// depth is the nesting depth of the simple command being unwrapped,
	// for wrappers that judge several scripts themselves.
	depth int
}

func (c *collector) add(it item) { c.items = append(c.items, it) }

// script parses src and collects every simple command in it.
func (c *collector) script(src string, depth int) error {
	f, err := c.parser.Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	c.walk(f, src, depth)
	return nil
}

// walk visits every node, so simple commands anywhere (substitutions,
// redirect targets, assignments, function bodies, conditions) are found.
func (c *collector) walk(n syntax.Node, src string, depth int) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			for _, a := range n.Assigns {
				if a.Name != nil && a.Name.Value == "IFS" && len(n.Args) > 0 && readsInput(n.Args[0]) && a.Index == nil && a.Array == nil &&
					(a.Value == nil || wordOf(a.Value, src).lit) {
					continue // IFS= read -r line: splits only what read reads
				}
				c.assign(a, src)
			}
			if len(n.Args) > 0 {
				argv := make([]word, len(n.Args))
				for i, w := range n.Args {
					argv[i] = wordOf(w, src)
				}
				c.simple(argv, nil, depth, 0)
			}
		case *syntax.DeclClause:
			argv := declArgv(n, src)
			c.add(item{argv: argv})
			c.decl(n, argv, src)
		case *syntax.ArithmExp:
			if !arithLiteral(n.X) {
				c.runsOnlyNode(src, n, "does arithmetic on variables, which bash evaluates as code")
			}
		case *syntax.ArithmCmd:
			if !arithLiteral(n.X) {
				c.runsOnlyNode(src, n, "does arithmetic on variables, which bash evaluates as code")
			}
		case *syntax.LetClause:
			for _, x := range n.Exprs {
				if !arithLiteral(x) {
					c.runsOnlyNode(src, n, "does arithmetic on variables, which bash evaluates as code")
					break
				}
			}
		case *syntax.CStyleLoop:
			if !arithLiteral(n.Init) || !arithLiteral(n.Cond) || !arithLiteral(n.Post) {
				c.runsOnlyNode(src, n, "does arithmetic on variables, which bash evaluates as code")
			}
		case *syntax.ParamExp:
			c.param(n, src)
		case *syntax.BinaryTest:
			if isArithTest(n.Op) && (!numericWord(n.X, src) || !numericWord(n.Y, src)) {
				c.runsOnlyNode(src, n, "compares integers, which bash evaluates as arithmetic code")
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				c.varTest(n, src)
			}
		case *syntax.Redirect:
			c.redirect(n, src)
		case *syntax.WordIter:
			if n.Name != nil {
				c.target([]word{{s: sourceOf(src, n)}}, word{s: n.Name.Value, pre: n.Name.Value, lit: true})
			}
		case *syntax.ExtGlob:
			// The parser keeps an extended glob's pattern as text, but bash
			// still expands substitutions inside it.
			if v := n.Pattern.Value; strings.Contains(v, "$(") || strings.Contains(v, "`") ||
				strings.Contains(v, "<(") || strings.Contains(v, ">(") {
				c.add(item{argv: []word{{s: sourceOf(src, n)}}, why: whyExtGlob})
			}
		}
		return true
	})
}

// readsInput reports whether a command word is read, mapfile or
// readarray, for which an IFS prefix only changes how input is split.
func readsInput(w *syntax.Word) bool {
	switch w.Lit() {
	case "read", "mapfile", "readarray":
		return true
	}
	return false
}

// simple judges one simple command's argv, unwrapping wrappers. parent is
// the argv of the wrapper around it, if any, for messages.
func (c *collector) simple(argv, parent []word, depth, wrappers int) {
	if len(argv) == 0 {
		return
	}
	w0 := argv[0]
	if !w0.lit {
		if w0.hidden && parent != nil {
			c.add(item{argv: parent, why: whyFromInput})
		} else {
			c.add(item{argv: argv, why: whyNotLiteral})
		}
		return
	}
	if w0.glob {
		c.add(item{argv: argv, why: whyGlob})
		return
	}
	name := path.Base(w0.s)
	if mc, ok := multiCall(argv); ok {
		// git-core/git-push is git push; busybox rm is rm.
		if wrappers >= maxWrappers {
			c.add(item{argv: argv, why: whyWrappers})
			return
		}
		c.add(item{argv: argv, wrapper: true})
		c.simple(mc, argv, depth, wrappers+1)
		return
	}
	if c.builtins(name, argv, depth) {
		return
	}
	if fileWriters[name] {
		c.writtenArgs(argv, 1)
	}
	if name == "dd" {
		for _, a := range argv[1:] {
			if v, ok := strings.CutPrefix(a.pre, "of="); ok {
				c.written(argv, word{s: a.s[3:], pre: v, lit: a.lit})
			}
		}
	}
	if _, ok := codeOpts[name]; ok || name == "sed" || name == "gsed" || strings.HasPrefix(name, "vim") {
		c.codeOptions(name, argv)
	}
	if _, ok := outputOpts[name]; ok {
		c.outputOptions(name, argv)
	}
	if _, ok := envValueOpts[name]; ok {
		c.envOptions(name, argv)
	}
	switch name {
	case "git":
		c.add(item{argv: argv})
		c.git(argv, depth)
		return
	case "eval":
		c.add(item{argv: argv, why: whyEval, runs: true})
		return
	case "source", ".":
		c.add(item{argv: argv, why: whySource, runs: true})
		return
	case "find":
		c.add(item{argv: argv})
		c.findExec(argv, depth, wrappers)
		return
	}
	un, ok := wrapperFuncs[name]
	if !ok && isLoader(name) {
		un, ok = unwrapLoader, true
	}
	if !ok {
		c.add(item{argv: argv})
		return
	}
	if wrappers >= maxWrappers {
		c.add(item{argv: argv, why: whyWrappers})
		return
	}
	c.depth = depth
	u := un(c, argv)
	switch u.kind {
	case runsNothing:
		c.add(item{argv: argv})
	case runsUnknown:
		c.add(item{argv: argv, why: whyWrapped, detail: u.why})
	case runsArgv:
		c.add(item{argv: argv, wrapper: true})
		c.simple(u.argv, argv, depth, wrappers+1)
	case runsScript:
		c.add(item{argv: argv, wrapper: true})
		c.nested(argv, u.script, depth)
	}
}

// nested parses a script that a wrapper runs (bash -c, su -c, trap).
func (c *collector) nested(argv []word, script word, depth int) {
	switch {
	case !script.lit:
		c.add(item{argv: argv, why: whyScriptNotLiteral})
	case depth >= maxDepth:
		c.add(item{argv: argv, why: whyDepth})
	case tooDeep(script.s):
		c.add(item{argv: argv, why: whyParens})
	default:
		if err := c.script(script.s, depth+1); err != nil {
			c.add(item{argv: argv, why: whyParse, detail: err.Error()})
		}
	}
}

// findExec judges the commands that find's -exec, -execdir, -ok and
// -okdir run; `{}` stands for a path only known at run time.
func (c *collector) findExec(argv []word, depth, wrappers int) {
	for i := 1; i < len(argv); i++ {
		switch argv[i].s {
		case "-exec", "-execdir", "-ok", "-okdir":
		case "-fprint", "-fprint0", "-fprintf", "-fls":
			if i+1 < len(argv) {
				c.written(argv, argv[i+1])
			}
			continue
		default:
			continue
		}
		if !argv[i].lit {
			continue
		}
		var cmd []word
		j := i + 1
		for ; j < len(argv); j++ {
			a := argv[j]
			if a.lit && (a.s == ";" || (a.s == "+" && j > i+1 && argv[j-1].s == "{}")) {
				break
			}
			if a.lit && strings.Contains(a.s, "{}") {
				a = word{s: a.s}
			}
			cmd = append(cmd, a)
		}
		c.simple(cmd, argv, depth, wrappers+1)
		i = j
	}
}

// trap judges a trap command, and the handler it installs as shell code.
func (c *collector) trap(argv []word, depth int) {
	args := argv[1:]
	if len(args) > 0 && args[0].lit && args[0].s == "--" {
		args = args[1:]
	}
	h := word{lit: true}
	if len(args) >= 2 {
		h = args[0] // with one argument, trap resets that signal
	}
	if !h.lit {
		c.add(item{argv: argv, why: whyScriptNotLiteral})
		return
	}
	c.add(item{argv: argv})
	if h.s == "" || h.s == "-" || strings.HasPrefix(h.s, "-") {
		return // ignores or resets signals, or an option such as -p
	}
	c.nested(argv, h, depth)
}

// declArgv renders a declaration (export, local, declare, readonly,
// typeset) as the argv bash would run it with.
func declArgv(d *syntax.DeclClause, src string) []word {
	argv := []word{{s: d.Variant.Value, pre: d.Variant.Value, lit: true}}
	for _, a := range d.Args {
		switch {
		case a.Naked && a.Name == nil && a.Value != nil:
			argv = append(argv, wordOf(a.Value, src))
		case a.Naked && a.Name != nil && a.Index == nil:
			argv = append(argv, word{s: a.Name.Value, pre: a.Name.Value, lit: true})
		default:
			w := word{s: sourceOf(src, a)}
			if a.Name != nil && a.Index == nil && a.Array == nil {
				op := "="
				if a.Append {
					op = "+="
				}
				w.pre = a.Name.Value + op
				v := word{lit: true}
				if a.Value != nil {
					v = wordOf(a.Value, src)
				}
				if v.lit {
					w = word{s: w.pre + v.s, pre: w.pre + v.s, lit: true}
				} else {
					w.pre += v.pre
				}
			}
			argv = append(argv, w)
		}
	}
	return argv
}

// wordOf removes quotes from a word. The word is literal only if it has no
// expansions: only plain text, '…', and "…" without $ or `…` inside.
func wordOf(w *syntax.Word, src string) word {
	if len(w.Parts) == 1 {
		// Fast path: a plain unquoted word with nothing to unescape.
		if l, ok := w.Parts[0].(*syntax.Lit); ok && !strings.ContainsAny(l.Value, "\\*?[{") {
			return word{s: l.Value, pre: l.Value, lit: true}
		}
	}
	var b strings.Builder
	glob, brace := false, false
	for _, part := range w.Parts {
		ok := true
		switch part := part.(type) {
		case *syntax.Lit:
			glob = unquoteLit(&b, part.Value) || glob
			brace = brace || strings.Contains(part.Value, "{")
		case *syntax.SglQuoted:
			if part.Dollar && strings.ContainsRune(part.Value, '\\') {
				ok = false
				break
			}
			b.WriteString(part.Value)
		case *syntax.DblQuoted:
			if part.Dollar {
				ok = false
				break
			}
			for _, in := range part.Parts {
				l, isLit := in.(*syntax.Lit)
				if !isLit {
					ok = false
					break
				}
				unquoteDbl(&b, l.Value)
			}
		default:
			ok = false
		}
		if !ok {
			return word{s: sourceOf(src, w), pre: b.String()}
		}
	}
	if brace {
		if hasBraceExp(w) {
			return word{s: sourceOf(src, w)}
		}
	}
	s := b.String()
	return word{s: s, pre: s, lit: true, glob: glob}
}

// hasBraceExp reports whether bash would brace-expand the word, like
// {a,b} or {1..3}; such a word stands for several words.
func hasBraceExp(w *syntax.Word) bool {
	cp := &syntax.Word{Parts: w.Parts} // SplitBraces rewrites the word it is given
	if !syntax.SplitBraces(cp) {
		return false
	}
	for _, p := range cp.Parts {
		if _, ok := p.(*syntax.BraceExp); ok {
			return true
		}
	}
	return false
}

// unquoteLit writes an unquoted literal with backslash escapes removed,
// and reports whether it has glob characters that bash would expand.
func unquoteLit(b *strings.Builder, v string) (glob bool) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch c {
		case '\\':
			if i+1 < len(v) {
				i++
				if v[i] != '\n' {
					b.WriteByte(v[i])
				}
				continue
			}
		case '*', '?':
			glob = true
		case '[':
			if strings.IndexByte(v[i+1:], ']') >= 0 {
				glob = true
			}
		}
		b.WriteByte(c)
	}
	return glob
}

// unquoteDbl writes the literal text of a double-quoted part: inside "…"
// a backslash only escapes $ ` " \ and newline.
func unquoteDbl(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(v[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
}

// sourceOf returns a node's text as written, for messages.
func sourceOf(src string, n syntax.Node) string {
	start, end := n.Pos().Offset(), n.End().Offset()
	if !n.Pos().IsValid() || !n.End().IsValid() || start > end || end > uint(len(src)) {
		return "…"
	}
	return src[start:end]
}

// quoteArgv renders an argv for a message, shortened if long.
func quoteArgv(argv []word) string {
	var b strings.Builder
	for _, w := range argv {
		if w.hidden {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if room := maxShown + 1 - b.Len(); len(w.s) > room {
			b.WriteString(w.s[:max(room, 0)]) // quoteShort cuts on a rune boundary
			break
		}
		b.WriteString(w.s)
	}
	return quoteShort(b.String())
}

// maxShown bounds how much of a command a message quotes.
const maxShown = 200

// quoteShort quotes s, cut to maxShown bytes on a rune boundary.
func quoteShort(s string) string {
	if len(s) > maxShown {
		cut := maxShown
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
