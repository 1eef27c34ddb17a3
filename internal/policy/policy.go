package policy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Decision is what happens to an action. Decisions are ordered by
// strictness, Allow < Forward < Ask < Deny, so that combining several is
// taking the maximum. Ask and Forward both wait for someone; when both
// apply, Ask (the local human) wins over Forward.
type Decision int

// The decisions, least strict first.
const (
	// Allow runs the action unwatched.
	Allow Decision = iota
	// Forward sends the action upstream for approval.
	Forward
	// Ask waits for the local human to approve the action.
	Ask
	// Deny never runs the action.
	Deny
)

var decisionNames = [...]string{"allow", "forward", "ask", "deny"}

// String returns the decision's configuration word, so verdicts read the
// way policies are written.
func (d Decision) String() string {
	if d >= Allow && d <= Deny {
		return decisionNames[d]
	}
	return "Decision(" + strconv.Itoa(int(d)) + ")"
}

// ParseDecision reads a decision word from configuration: allow (or yes),
// deny (or no), ask, or forward, in any case.
func ParseDecision(s string) (Decision, error) {
	switch strings.ToLower(s) {
	case "allow", "yes":
		return Allow, nil
	case "deny", "no":
		return Deny, nil
	case "ask":
		return Ask, nil
	case "forward":
		return Forward, nil
	case "":
		return 0, errors.New("missing decision: want allow (or yes), deny (or no), ask, or forward")
	}
	return 0, fmt.Errorf("unknown decision %q: want allow (or yes), deny (or no), ask, or forward", s)
}

// RuleSpec is a rule as the operator configured it, before Compile checks
// it. Tool names a tool exactly; Command is a pattern over a simple
// command's argv; Path a glob over a file tool's path (paths.go); at least
// one must be set, and not both Command and Path.
type RuleSpec struct {
	Tool     string
	Command  string
	Path     string
	Decision string
}

// Policy is a compiled mode and rule list, ready to judge actions. It is
// immutable, and Decide is safe for concurrent use. A nil or zero *Policy
// allows everything (mode allow, no rules).
type Policy struct {
	mode  Decision
	rules []rule
	// parsers are reused across decisions; a syntax.Parser is not safe
	// for concurrent use.
	parsers sync.Pool
}

// rule is a compiled RuleSpec.
type rule struct {
	ref  string   // "rules[1]"
	text string   // `rules[1] {command: "rm -rf *", decision: deny}`
	tool string   // "" for any tool
	pat  []pword  // nil for a tool-only rule
	glob []string // a path rule's glob segments (paths.go); nil otherwise
	dec  Decision
}

func newParser() *syntax.Parser { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }

// parser takes a parser from the policy's pool, or makes one.
func (p *Policy) parser() *syntax.Parser {
	if ps, ok := p.parsers.Get().(*syntax.Parser); ok {
		return ps
	}
	return newParser()
}

// Compile checks a mode and rules and compiles them. An empty mode means
// allow. Errors name the offending field, e.g. "rules[2].command: …".
func Compile(mode string, rules []RuleSpec) (*Policy, error) {
	p := &Policy{}
	if mode != "" {
		d, err := ParseDecision(mode)
		if err != nil {
			return nil, fmt.Errorf("mode: %w", err)
		}
		p.mode = d
	}
	parser := newParser()
	for i, rs := range rules {
		r := rule{ref: fmt.Sprintf("rules[%d]", i), tool: rs.Tool}
		if rs.Tool == "" && rs.Command == "" && rs.Path == "" {
			return nil, fmt.Errorf("%s: set tool, command, or both (or path, for file tools)", r.ref)
		}
		if rs.Command != "" && rs.Path != "" {
			return nil, fmt.Errorf("%s: a rule judges a command or a path, not both", r.ref)
		}
		d, err := ParseDecision(rs.Decision)
		if err != nil {
			return nil, fmt.Errorf("%s.decision: %w", r.ref, err)
		}
		r.dec = d
		if rs.Command != "" {
			if len(rs.Command) > maxCommandBytes {
				return nil, fmt.Errorf("%s.command: longer than %d bytes", r.ref, maxCommandBytes)
			}
			r.pat, err = compilePattern(parser, rs.Command)
			if err != nil {
				return nil, fmt.Errorf("%s.command: %q: %w", r.ref, rs.Command, err)
			}
		}
		if rs.Path != "" {
			if r.glob, err = compileGlob(rs.Path); err != nil {
				return nil, fmt.Errorf("%s.path: %w", r.ref, err)
			}
		}
		r.text = ruleText(r.ref, rs)
		p.rules = append(p.rules, r)
	}
	return p, nil
}

// ruleText renders a rule as the operator wrote it, for Verdict.Rule.
func ruleText(ref string, rs RuleSpec) string {
	var parts []string
	if rs.Tool != "" {
		parts = append(parts, "tool: "+rs.Tool)
	}
	if rs.Command != "" {
		parts = append(parts, "command: "+strconv.Quote(rs.Command))
	}
	if rs.Path != "" {
		parts = append(parts, "path: "+strconv.Quote(rs.Path))
	}
	parts = append(parts, "decision: "+rs.Decision)
	return ref + " {" + strings.Join(parts, ", ") + "}"
}

// Mode returns the decision that applies when no rule matches, for
// display.
func (p *Policy) Mode() Decision {
	if p == nil {
		return Allow
	}
	return p.mode
}

// Input is one action to judge.
type Input struct {
	// Tool is the MCP tool name (e.g. "ssh_exec", "ssh_disconnect") or a
	// Claude Code tool name (e.g. "Bash", "Edit").
	Tool string
	// Command is the shell command, for command tools.
	Command string
	// HasCommand says Tool is a command tool (ssh_exec, Bash), so Command
	// is parsed and judged.
	HasCommand bool
	// ExecJudged says the session judges every program its shell starts
	// with these same command rules (DecideExec; a sandboxed local
	// session). A line that asks only because its judge cannot see which
	// programs it runs (source, eval, set -a, PATH=…, alias, arithmetic
	// on variables, git config, a history designator) is then judged as
	// if it could, where exec judging enforces every rule that could
	// refuse or hold it: none names a builtin (execseen.go).
	ExecJudged bool
	// Path is the file a file tool (ssh_upload, ssh_download) reads or
	// writes, relative to the session's workspace, clean and with its
	// symlinks resolved; HasPath says Tool is one, so path rules judge it.
	Path    string
	HasPath bool
}

// Verdict is a decision and why, for the approval flow, the audit log and
// the dashboard.
type Verdict struct {
	Decision Decision
	// Rule is the rule that decided, as the operator wrote it, e.g.
	// `rules[1] {command: "rm -rf *", decision: deny}`; or "mode ask" when
	// no rule matched; or "unjudgeable" when the command failed closed.
	Rule string
	// Reason is one sentence a human or an agent can read, e.g.
	// `"rm -rf /tmp/x" matches rules[1] (deny)`.
	Reason string
	// Commands is every simple command judged, after unwrapping, as argv.
	// Words that are not literal are shown as written.
	Commands [][]string
}

// unjudgeable is Verdict.Rule for commands that fail closed.
const unjudgeable = "unjudgeable"

// Decide judges one action. It never panics, and its work is bounded by
// the command's length, which is capped.
func (p *Policy) Decide(in Input) (v Verdict) {
	if p == nil {
		p = &Policy{}
	}
	if in.HasPath {
		return p.decidePath(in.Tool, in.Path)
	}
	if !in.HasCommand {
		return p.baseline(in.Tool, "")
	}
	if len(in.Command) > maxCommandBytes {
		return p.failClosed(in.Tool, fmt.Sprintf("the command is %d bytes, over the %d-byte limit, so it is not judged", len(in.Command), maxCommandBytes))
	}
	if tooDeep(in.Command) {
		return p.failClosed(in.Tool, fmt.Sprintf("the command nests parentheses more than %d deep, so it is not judged", maxParens))
	}
	defer func() {
		// A bug here must not take the server down or let a command through.
		if r := recover(); r != nil {
			v = p.failClosed(in.Tool, fmt.Sprintf("internal error judging the command: %v", r))
		}
	}()
	parser := p.parser()
	c := collector{parser: parser}
	err := c.script(in.Command, 0)
	if err == nil && c.comments {
		// The line may turn interactive_comments off: bash then reads a
		// '#' as a word, and runs what follows it.
		if s, ok := commentFree(in.Command); ok {
			if err2 := c.script(s, 1); err2 != nil {
				c.add(item{argv: []word{{s: "shopt"}}, why: whyParse, detail: err2.Error()})
			}
		}
	}
	p.parsers.Put(parser)
	if err != nil {
		return p.failClosed(in.Tool, "parse error: "+err.Error())
	}
	if strings.ContainsRune(in.Command, '\r') {
		// The parser reads a carriage return as a blank; bash reads it as
		// part of a word.
		c.risky([]word{{s: "\\r"}}, "is a carriage return, which bash reads as part of a word where the parser saw a blank")
	}
	if historyExpands(in.Command) {
		// Bash expands history before it parses: with history expansion
		// on, what runs is not what was judged.
		c.runsOnly([]word{{s: "!"}}, "is a history expansion, which bash may replace with other commands after the line was judged")
	}
	return p.judge(in.Tool, c.items, in.ExecJudged && p.execEnforced(in.Tool))
}

// baseline is the decision for the tool as a whole: the strictest
// tool-only rule that matches, else the mode. what prefixes the reason.
func (p *Policy) baseline(tool, what string) Verdict {
	var best *rule
	for i := range p.rules {
		r := &p.rules[i]
		if r.pat == nil && r.glob == nil && r.tool == tool && (best == nil || r.dec > best.dec) {
			best = r
		}
	}
	if best != nil {
		return Verdict{Decision: best.dec, Rule: best.text, Reason: fmt.Sprintf("%stool %s matches %s (%s)", what, quoteShort(tool), best.ref, best.dec)}
	}
	return Verdict{Decision: p.mode, Rule: "mode " + p.mode.String(), Reason: fmt.Sprintf("%stool %s matches no rule; mode is %s", what, quoteShort(tool), p.mode)}
}

// failClosed is the verdict for a command that cannot be judged at all:
// at least Ask, or Deny if the tool's rules or the mode say so.
func (p *Policy) failClosed(tool, reason string) Verdict {
	b := p.baseline(tool, "")
	if b.Decision > Ask {
		return Verdict{Decision: b.Decision, Rule: b.Rule, Reason: reason + "; " + b.Reason}
	}
	return Verdict{Decision: Ask, Rule: unjudgeable, Reason: reason}
}

// judge combines the items' decisions: the strictest wins, the first on
// ties. With no simple commands the tool's baseline decides. Messages are
// built only for the deciding item. atExec says exec judging enforces
// every rule that could refuse or hold what the line runs.
func (p *Policy) judge(tool string, items []item, atExec bool) Verdict {
	var m matcher
	var best finding
	have := false
	var cmds [][]string
	for i := range items {
		it := &items[i]
		f, ok := p.judgeItem(it, tool, &m, atExec)
		if !it.wrapper && !it.extra {
			cmds = append(cmds, it.visible())
		}
		if ok && (!have || f.dec > best.dec) {
			best, have = f, true
		}
	}
	var v Verdict
	if have {
		v = p.verdict(best, tool)
	}
	if len(cmds) == 0 {
		b := p.baseline(tool, "the command runs no simple command; ")
		if !have || b.Decision >= v.Decision {
			v = b
		}
	}
	v.Commands = cmds
	return v
}

// finding is the decision on one item, and what made it.
type finding struct {
	dec  Decision
	how  how
	rule *rule // for byRule, byTool and byMaybe
	it   *item
}

// how an item's decision was made.
type how uint8

const (
	byRule  how = iota // a command rule matched
	byTool             // a tool-only rule matched
	byMode             // no rule matched
	byWhy              // the item cannot be judged statically
	byMaybe            // a rule might match
)

// judgeItem decides one item. ok is false for a wrapper that no rule
// matched, which then has no say. atExec lets an item that hides only
// which programs run keep an allow: exec judging judges those programs.
func (p *Policy) judgeItem(it *item, tool string, m *matcher, atExec bool) (f finding, ok bool) {
	var def, maybe *rule
	for i := range p.rules {
		r := &p.rules[i]
		if (r.tool != "" && r.tool != tool) || r.glob != nil {
			continue
		}
		var res match
		switch {
		case r.pat != nil:
			res = m.match(r.pat, it.argv)
		case it.wrapper:
			continue // tool rules apply to the wrapped command
		default:
			res = isMatch
		}
		switch {
		case res == isMatch:
			if def == nil || r.dec > def.dec {
				def = r
			}
		case res == mayMatch && r.dec > Allow:
			if maybe == nil || r.dec > maybe.dec {
				maybe = r
			}
		}
	}
	f.it = it
	switch {
	case def != nil && def.pat == nil:
		f.dec, f.how, f.rule = def.dec, byTool, def
	case def != nil:
		f.dec, f.how, f.rule = def.dec, byRule, def
	case it.wrapper:
		if maybe == nil {
			return f, false
		}
	default:
		f.dec, f.how = p.mode, byMode
	}
	// Failing closed raises Allow and Forward to Ask, and replaces a
	// mode-made Ask, whose reason would be misleading.
	weak := f.dec < Ask || (f.dec == Ask && f.how == byMode)
	seenAtExec := atExec && it.runs && f.dec == Allow
	switch {
	case it.why != judgeable && weak && !seenAtExec:
		f.dec, f.how, f.rule = Ask, byWhy, nil
	case maybe != nil && weak && !seenAtExec:
		// (An item seen at exec is a builtin or a marker: a rule that
		// might match its words names a program, judged where it starts.)
		f.dec, f.how, f.rule = Ask, byMaybe, maybe
	}
	return f, true
}

// verdict explains a finding.
func (p *Policy) verdict(f finding, tool string) Verdict {
	cmd := quoteArgv(f.it.argv)
	switch f.how {
	case byRule:
		return Verdict{Decision: f.dec, Rule: f.rule.text, Reason: fmt.Sprintf("%s matches %s (%s)", cmd, f.rule.ref, f.dec)}
	case byTool:
		return Verdict{Decision: f.dec, Rule: f.rule.text, Reason: fmt.Sprintf("%s: tool %s matches %s (%s)", cmd, quoteShort(tool), f.rule.ref, f.dec)}
	case byWhy:
		return Verdict{Decision: f.dec, Rule: unjudgeable, Reason: f.it.explain()}
	case byMaybe:
		return Verdict{Decision: f.dec, Rule: f.rule.text, Reason: fmt.Sprintf(
			"%s might match %s (%s): some of its words are only known when it runs, so it is not allowed unwatched", cmd, f.rule.ref, f.rule.dec)}
	}
	return Verdict{Decision: f.dec, Rule: "mode " + p.mode.String(), Reason: fmt.Sprintf("%s matches no rule; mode is %s", cmd, p.mode)}
}
