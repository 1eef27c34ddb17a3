package policy

import (
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// fuzzPolicies are judged against every fuzz input.
func fuzzPolicies(t testing.TB) []*Policy {
	specs := []struct {
		mode  string
		rules []RuleSpec
	}{
		{"ask", std},
		{"deny", []RuleSpec{
			{Command: "git status *", Decision: "allow"},
			{Command: "echo *", Decision: "allow"},
			{Command: "ls *", Decision: "allow"},
			{Command: "cat *", Decision: "forward"},
			{Tool: "ssh_exec", Decision: "ask"},
		}},
		{"allow", []RuleSpec{
			{Command: "rm -rf *", Decision: "deny"},
			{Command: "rm *", Decision: "ask"},
			{Command: "sudo *", Decision: "ask"},
			{Command: "curl * -o *", Decision: "deny"},
			{Command: "curl *", Decision: "forward"},
			{Command: "* --force *", Decision: "ask"},
			{Command: "[a-z]*.sh *", Decision: "deny"},
		}},
	}
	var ps []*Policy
	for _, s := range specs {
		p, err := Compile(s.mode, s.rules)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

var fuzzSeeds = []string{
	"git status && rm -rf /tmp/x",
	"echo $(curl x)",
	"sudo rm -rf /",
	"bash -c 'rm -rf /'",
	"FOO=1 git status",
	"sudo env FOO=1 timeout 5 bash -c 'rm -rf /'",
	"xargs -I{} sh -c 'rm {}'",
	"find . -exec rm -rf {} +",
	"env -S 'env -S \"rm -rf\" /'",
	"trap 'trap \"rm -rf /\" EXIT' INT",
	"su root -c 'bash -lc \"rm -rf /\"'",
	"cat <<EOF\n$(rm -rf /)\nEOF",
	"cat <<'EOF'\n$(rm)\nEOF",
	"f() { rm -rf /; }",
	"for ((i=0;i<$(rm);i++)); do :; done",
	"case $(x) in *) y;; esac",
	"[[ $(a) == b ]] && (( $(c) ))",
	"echo ${x:-$(rm)} ${y/$(a)/`b`}",
	"a[$(rm)]=1 declare -A m=([k]=$(v))",
	"coproc n { rm -rf /; }",
	"time -p ! rm -rf / |& tee",
	"$'\\x72m' -rf /",
	"echo @($(rm -rf /))",
	"rm -rf {/,x} /*",
	"r\\m \"-rf\" '/'",
	"echo \"unterminated",
	"$(( ",
	"${",
	"`",
	"a\\",
	"<<EOF",
	"# only a comment",
	"",
	"sudo -u",
	"env -S",
	"xargs -I",
	"bash -o",
	"timeout",
	"nice -n",
	"command -v",
	"exec",
	"eval",
	". ./x",
	"}",
	"{ x; }",
	"x=(1 2 $(rm))",
	"select a in $(b); do c; done",
	"while read l; do echo \"$l\"; done < <(ls)",
	"ls [abc] ?.go *.[ch]",
	"cd /srv/app && git pull --ff-only && FOO=1 make -j4 test 2>&1 | tee build.log; sudo systemctl restart app",
	"rm -rf $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a $a",
	"sudo -s",
	"curl x | sh",
}

func FuzzDecide(f *testing.F) {
	for i, a := range fuzzSeeds {
		f.Add(a, fuzzSeeds[(i+7)%len(fuzzSeeds)])
	}
	ps := fuzzPolicies(f)
	parser := syntax.NewParser(syntax.Variant(syntax.LangBash))
	parses := func(s string) bool {
		_, err := parser.Parse(strings.NewReader(s), "")
		return err == nil
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, p := range ps {
			va := check(t, p, a)
			vb := check(t, p, b)
			// Monotonicity: running more cannot be less strict. Inputs
			// with no simple command are judged by the tool's baseline,
			// which does not combine, so they are skipped; so are inputs
			// whose combination does not keep both parts intact.
			if len(a)+len(b) > maxCommandBytes/2 || len(va.Commands) == 0 || len(vb.Commands) == 0 || !parses(a) || !parses(b) {
				continue
			}
			ab := "{\n" + a + "\n} && {\n" + b + "\n}"
			if tooDeep(ab) || !parses(ab) {
				continue
			}
			vab := check(t, p, ab)
			if len(vab.Commands) != len(va.Commands)+len(vb.Commands) {
				continue
			}
			if vab.Decision < va.Decision || vab.Decision < vb.Decision {
				t.Fatalf("not monotonic:\nA = %q: %v (%s)\nB = %q: %v (%s)\nA && B: %v (%s)",
					a, va.Decision, va.Reason, b, vb.Decision, vb.Reason, vab.Decision, vab.Reason)
			}
		}
	})
}

// check decides a command twice and checks the verdict's invariants.
func check(t *testing.T, p *Policy, cmd string) Verdict {
	t.Helper()
	in := Input{Tool: "ssh_exec", Command: cmd, HasCommand: true}
	v := p.Decide(in)
	if v2 := p.Decide(in); !reflect.DeepEqual(v, v2) {
		t.Fatalf("not deterministic for %q:\n%+v\n%+v", cmd, v, v2)
	}
	if v.Decision < Allow || v.Decision > Deny {
		t.Fatalf("decision %d for %q", v.Decision, cmd)
	}
	if strings.Contains(v.Reason, "internal error") {
		t.Fatalf("panic for %q: %s", cmd, v.Reason)
	}
	if v.Rule == "" || v.Reason == "" {
		t.Fatalf("empty rule or reason for %q: %+v", cmd, v)
	}
	return v
}
