package mcp_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/mcptest"
	"github.com/tandem-sh/tandem/internal/policy"
)

// TestExecJudgingRefusedWithoutKernel: on a kernel that cannot judge
// execs, a local session whose policy has a refusing command rule is
// refused with sandbox_unavailable, rather than run judged by its line
// alone; a policy whose command rules only allow still connects.
func TestExecJudgingRefusedWithoutKernel(t *testing.T) {
	tests := []struct {
		name  string
		rules []policy.RuleSpec
		want  string // error code; "" connects
	}{
		{"deny rule", []policy.RuleSpec{{Command: "rm *", Decision: "deny"}}, "sandbox_unavailable"},
		{"ask rule", []policy.RuleSpec{{Command: "git push *", Decision: "ask"}}, "sandbox_unavailable"},
		{"allow rules only", []policy.RuleSpec{{Command: "ls *", Decision: "allow"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := policy.Compile("allow", tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			f := newServerWith(t, 0, func(d *mcp.Deps) {
				d.Policy = func(string, string) mcp.Policy { return mcp.Policy{Judge: p} }
				d.ExecJudging = func() error {
					return fmt.Errorf("%w: seccomp user notification is not available", execguard.ErrUnavailable)
				}
			})
			c := f.client(t)
			r := c.Call(t, "ssh_connect", map[string]any{"name": "k"})
			if tt.want == "" {
				mcptest.MustOK(t, r)
				return
			}
			e := mcptest.WantError(t, r, tt.want)
			if msg := mcptest.Str(e["message"]); !strings.Contains(msg, "must judge every program") || !strings.Contains(msg, "tandem sandbox") {
				t.Errorf("the refusal does not say why: %q", msg)
			}
		})
	}
}
