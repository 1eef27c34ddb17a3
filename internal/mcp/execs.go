package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

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
}

// execTool is the tool whose command rules judge execs: the programs a
// command starts are that command's.
const execTool = "ssh_exec"

// Recorded decisions of an exec (shell.ExecRuling.Decision).
const (
	execAllow    = "allow"
	execDeny     = "deny"
	execHuman    = "human"
	execApproved = "approved"
	execDenied   = "denied"
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
	if err := execguard.Available(); err != nil {
		return fmt.Errorf("%w: the policy's command rules must judge every program a local session starts, and this kernel cannot (%v); run `tandem sandbox` for details", target.ErrSandboxUnavailable, err)
	}
	t.JudgeExec = func(ctx context.Context, sess *session.Session, x shell.ExecInfo) shell.ExecRuling {
		return s.judgeExec(ctx, ej, sess, x)
	}
	return nil
}

// judgeExec decides one exec. A person's own foreground job is not the
// agent's and is not judged (it is recorded). Everything else is judged by
// the command rules: deny fails the exec; ask holds it for a human while
// an agent command runs, and fails it otherwise (there is no call to
// attach an approval to).
func (s *Server) judgeExec(ctx context.Context, ej ExecJudge, sess *session.Session, x shell.ExecInfo) shell.ExecRuling {
	if x.Source == "user" && x.Foreground {
		return shell.ExecRuling{Allow: true, Decision: execHuman}
	}
	e := policy.Exec{Tool: execTool, Path: x.Path, Argv: x.Argv, Truncated: x.Truncated}
	if r, err := filepath.EvalSymlinks(x.Path); err == nil && r != x.Path {
		e.Resolved = r
	}
	v := ej.DecideExec(e)
	switch v.Decision {
	case policy.Allow:
		return shell.ExecRuling{Allow: true, Decision: execAllow, Rule: v.Rule}
	case policy.Deny:
		return shell.ExecRuling{Decision: execDeny, Rule: v.Rule}
	}
	return s.askExec(ctx, sess, x, v)
}

// askExec holds an exec that a rule asks about until a human decides.
func (s *Server) askExec(_ context.Context, _ *session.Session, _ shell.ExecInfo, v policy.Verdict) shell.ExecRuling {
	return shell.ExecRuling{Decision: execDeny, Rule: v.Rule}
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
