package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/policy"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/target"
)

// ExecJudge is a Judge that can also judge one program as it starts;
// *policy.Policy implements it.
type ExecJudge interface {
	DecideExec(e policy.Exec) policy.Verdict
	// JudgesExecs says whether any exec could be refused or held.
	JudgesExecs() bool
	// JudgedArgv lists the argv the judge saw whole in a command line.
	JudgedArgv(line string) [][]string
}

// execTool is the tool whose command rules judge execs: the programs a
// command starts are that command's.
const execTool = "ssh_exec"

// byProgramGone decides an exec's approval whose program stopped waiting.
const byProgramGone = "program_gone"

// Recorded decisions of an exec (shell.ExecRuling.Decision).
const (
	execAllow    = "allow"
	execDeny     = "deny"
	execHuman    = "human"
	execApproved = "approved"
	execDenied   = "denied"
	// execLine: the exec is one the agent's command line names literally,
	// judged (and approved, where a rule asked) with the line.
	execLine = "line"
)

// judgeExecs arms exec judging on a sandboxed local target whose policy
// has command rules that refuse or hold: every program its shell starts is
// then judged by those rules. A kernel that cannot judge execs refuses
// the session rather than run it judged by the line alone. SSH targets
// and unsandboxed local ones keep line-level judging only.
func (s *Server) judgeExecs(c session.Caller, t *session.Target) error {
	if t.Kind != "local" || t.Sandbox == nil || s.deps.Policy == nil {
		return nil
	}
	pol := s.deps.Policy(c.Tenant, t.Name)
	ej, ok := pol.Judge.(ExecJudge)
	if !ok || !ej.JudgesExecs() {
		return nil
	}
	available := s.deps.ExecJudging
	if available == nil {
		available = execguard.Available
	}
	if err := available(); err != nil {
		return fmt.Errorf("%w: the policy's command rules must judge every program a local session starts, and this kernel cannot (%v); run `tandem sandbox` for details", target.ErrSandboxUnavailable, err)
	}
	d := &denials{}
	l := &lineExecs{}
	t.JudgeExec = func(ctx context.Context, sess *session.Session, x shell.ExecInfo) shell.ExecRuling {
		return s.judgeExec(ctx, ej, d, l, sess, x)
	}
	return nil
}

// namedForItself reports whether the program is the one its argv[0]
// names: its path, and the path with symlinks resolved in the process's
// own view, end in that name. Only then is an exec what the line's judge
// saw: `hash -p /bin/rm lsh`, a symlink named ls, or `exec -a ls rm`
// start rm under another name.
func namedForItself(x shell.ExecInfo) bool {
	if len(x.Argv) == 0 {
		return false
	}
	name := filepath.Base(x.Argv[0])
	if filepath.Base(x.Path) != name {
		return false
	}
	r, _, err := x.Look(x.Path)
	return err == nil && filepath.Base(r) == name
}

// lineExecs lets each program that the agent's command line names
// literally (rm data.txt in "rm data.txt") start once without a second
// judgement: the line was judged with that very argv before it ran, and a
// human who approved the line must not be asked again for the same
// program. Each literal simple command of the line covers one exec with
// exactly its argv; any other program, or the same argv a second time (a
// script repeating it), is judged on its own.
type lineExecs struct {
	mu      sync.Mutex
	command string         // the CommandID the counts are for
	left    map[string]int // quoted argv -> execs it still covers
}

// take reports whether x is covered by its command line, and uses up
// that cover.
func (l *lineExecs) take(ej ExecJudge, x shell.ExecInfo) bool {
	if x.Truncated || x.CommandID == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.command != x.CommandID {
		l.command, l.left = x.CommandID, map[string]int{}
		for _, argv := range ej.JudgedArgv(x.Command) {
			l.left[shellQuote(argv, false)]++
		}
	}
	k := shellQuote(x.Argv, false)
	if l.left[k] == 0 {
		return false
	}
	l.left[k]--
	return true
}

// denials remembers, for the agent command that runs, the programs a human
// denied: a shell that searches PATH tries the same program again in the
// next directory (/usr/bin/git, then /bin/git), and the human is not asked
// twice. A new command forgets them.
type denials struct {
	mu      sync.Mutex
	command string
	denied  map[string]bool
}

func (d *denials) key(x shell.ExecInfo) string {
	return shellQuote(x.Argv, x.Truncated) + "\x00" + x.Cwd
}

// has reports whether x was denied in its command already.
func (d *denials) has(x shell.ExecInfo) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.command == x.CommandID && d.denied[d.key(x)]
}

// add remembers that x was denied.
func (d *denials) add(x shell.ExecInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.command != x.CommandID {
		d.command, d.denied = x.CommandID, map[string]bool{}
	}
	if len(d.denied) < shell.MaxExecRecords {
		d.denied[d.key(x)] = true
	}
}

// judgeExec decides one exec. A person's own process (one that descends
// from a command they started) is not the agent's and is not judged (it
// is recorded). Everything else is judged by
// the command rules: deny fails the exec; ask holds it for a human while
// an agent command runs, and fails it otherwise (there is no call to
// attach an approval to).
func (s *Server) judgeExec(ctx context.Context, ej ExecJudge, d *denials, l *lineExecs, sess *session.Session, x shell.ExecInfo) shell.ExecRuling {
	if x.Human {
		return shell.ExecRuling{Allow: true, Decision: execHuman}
	}
	// The program is looked at as the process sees it (its /dev/fd, its
	// symlinks), and judged as what it runs: a #! script's interpreter,
	// the loader's program, a multi-call name.
	v := ej.DecideExec(policy.Exec{Tool: execTool, Path: x.Path, Argv: x.Argv, Truncated: x.Truncated, Look: x.Look})
	if x.Source == "agent" && len(v.Commands) == 1 && namedForItself(x) && l.take(ej, x) {
		// Exactly the argv the agent's line named, and nothing else runs.
		return shell.ExecRuling{Allow: true, Decision: execLine}
	}
	switch v.Decision {
	case policy.Allow:
		return shell.ExecRuling{Allow: true, Decision: execAllow, Rule: v.Rule}
	case policy.Deny:
		// The monitoring page's strip lists a blocked program with its rule.
		sess.NoteDenied(session.Denial{Tool: execTool, Command: shellQuote(x.Argv, x.Truncated), Rule: v.Rule, At: time.Now()})
		return shell.ExecRuling{Decision: execDeny, Rule: v.Rule}
	}
	if d.has(x) {
		return shell.ExecRuling{Decision: execDenied, Rule: v.Rule}
	}
	r := s.askExec(ctx, sess, x, v)
	if r.Decision == execDenied {
		d.add(x)
	}
	return r
}

// askExec holds an exec that a rule asks about until a human decides, or
// the approval expires (denied). The agent's waiting ssh_exec call answers
// approval_pending once waitSeconds have passed (see ExecInfo.Hold). An
// exec outside an agent command is denied: no call waits for it.
func (s *Server) askExec(ctx context.Context, sess *session.Session, x shell.ExecInfo, v policy.Verdict) shell.ExecRuling {
	b := s.deps.Approvals
	if x.Source != "agent" || b == nil || x.Hold == nil {
		return shell.ExecRuling{Decision: execDeny, Rule: v.Rule}
	}
	c := sess.Caller()
	act := approval.Action{Tenant: c.Tenant, Actor: c.Actor, SessionID: sess.ID, SessionName: sess.Name,
		Target: sess.Target.Name, Tool: execTool, Command: shellQuote(x.Argv, x.Truncated), Cwd: x.Cwd, Parent: x.Command}
	reason := fmt.Sprintf("a program started by the agent's command %q: %s", clip(x.Command, 200), v.Reason)
	// The program waits in the kernel until the approval is decided or
	// expires; if it is killed, or its session ends, first, its approval
	// is settled.
	out, err := s.askHeld(ctx, heldAsk{sess: sess, act: act, rule: v.Rule, reason: reason, hold: x.Hold,
		forward: v.Decision == policy.Forward, gone: "the program stopped waiting: its process or its session ended"})
	if err == nil && out.Kind == approval.Run {
		return shell.ExecRuling{Allow: true, Decision: execApproved, Rule: v.Rule}
	}
	return shell.ExecRuling{Decision: execDenied, Rule: v.Rule}
}

// shellQuote shows argv as one command line a shell would split back into
// the same words.
func shellQuote(argv []string, truncated bool) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			b.WriteString(a)
			continue
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	if truncated {
		b.WriteString(" …")
	}
	return b.String()
}

// clip cuts s to at most n bytes on a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// blockedList renders the execs a command was refused, for its reply.
func blockedList(rec session.Record) []reply {
	out := make([]reply, 0, len(rec.Blocked))
	for _, b := range rec.Blocked {
		r := reply{"argv": b.Argv, "rule": b.Rule, "decision": b.Decision, "cwd": b.Cwd}
		if b.Truncated {
			r["argvTruncated"] = true
		}
		out = append(out, r)
	}
	return out
}

// blockedReason says, for the call's audit record, which programs the
// command was refused: "blocked: [{argv, rule}, ...]" as JSON, the first
// few of them.
func blockedReason(rec session.Record) string {
	if len(rec.Blocked) == 0 {
		return ""
	}
	type item struct {
		Argv []string `json:"argv"`
		Rule string   `json:"rule"`
	}
	const most = 20
	items := make([]item, 0, min(len(rec.Blocked), most))
	for _, b := range rec.Blocked[:min(len(rec.Blocked), most)] {
		items = append(items, item{Argv: b.Argv[:min(len(b.Argv), 64)], Rule: b.Rule})
	}
	j, _ := json.Marshal(items)
	r := "blocked: " + string(j)
	if n := len(rec.Blocked) - most; n > 0 {
		r += fmt.Sprintf(" and %d more", n)
	}
	return r
}

// heldFailure is the reply of an ssh_exec whose command has a program
// waiting for a human: approval_pending, with the command still running.
func (s *Server) heldFailure(c session.Caller, te *session.TimeoutError) *failure {
	f := reply{"running": true, "commandId": te.Partial.ID, "approvalId": te.Held, "partial": s.result(c, te.Partial)}
	what := "a program the command started"
	outcome := "it runs if approved and fails with \"Operation not permitted\" if denied"
	if b := s.deps.Approvals; b != nil {
		if a, ok := b.Get(te.Held); ok {
			f["expiresAt"] = a.Expires.UTC().Format(time.RFC3339Nano)
			f["rule"] = a.Rule
			if a.Action.Tool == networkTool {
				host := strings.TrimPrefix(a.Action.Command, "connect ")
				what = fmt.Sprintf("a connection to %s, which the session's network allowlist does not list,", host)
				outcome = "it goes through if approved and fails (403 from the proxy) if denied"
				f["connection"] = host
			} else {
				what = fmt.Sprintf("the program %q that the command started", a.Action.Command)
				f["program"] = reply{"command": a.Action.Command, "cwd": a.Action.Cwd}
			}
		}
	}
	return fail(codeApprovalPending, fmt.Sprintf("The command is running, and %s waits for a human's approval (%s); %s. Follow the command with ssh_read_output and its commandId (waitSeconds waits; running turns false when it ends); until it ends the session answers session_busy.", what, te.Held, outcome), f)
}
