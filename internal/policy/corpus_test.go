package policy

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// exampleRules is the README's example policy, with the issue's `echo *`.
var exampleRules = []RuleSpec{
	{Tool: "ssh_connect", Decision: "allow"},
	{Tool: "ssh_disconnect", Decision: "allow"},
	{Command: "git status", Decision: "allow"},
	{Command: "git diff *", Decision: "allow"},
	{Command: "echo *", Decision: "allow"},
	{Command: "rm -rf *", Decision: "deny"},
}

// corpusEntry is one line of testdata/bypass.txt.
type corpusEntry struct {
	line string
	rm   bool // the line reaches rm: an `rm *` deny rule denies it
}

// loadCorpus reads testdata/bypass.txt.
func loadCorpus(t testing.TB) []corpusEntry {
	f, err := os.Open("testdata/bypass.txt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	var out []corpusEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		kind, line, ok := strings.Cut(l, "|")
		if !ok || kind != "ask" && kind != "rm" {
			t.Fatalf("bad corpus line %q", l)
		}
		out = append(out, corpusEntry{line: strings.NewReplacer(`\n`, "\n", `\r`, "\r").Replace(line), rm: kind == "rm"})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusPolicies are the policies each bypass line is judged under: the
// README's example; the example with an `rm *` deny rule; and everything
// allowed but rm, where only what the line makes bash do can make it ask.
func corpusPolicies(t testing.TB) (example, denyRm, allowAll *Policy) {
	var err error
	if example, err = Compile("ask", exampleRules); err != nil {
		t.Fatal(err)
	}
	withRm := append(append([]RuleSpec(nil), exampleRules...), RuleSpec{Command: "rm *", Decision: "deny"})
	if denyRm, err = Compile("ask", withRm); err != nil {
		t.Fatal(err)
	}
	if allowAll, err = Compile("allow", []RuleSpec{{Command: "rm *", Decision: "deny"}}); err != nil {
		t.Fatal(err)
	}
	return example, denyRm, allowAll
}

// TestBypassCorpus: every bypass line asks under the README's example
// policy and under a policy that allows everything else, and one that
// reaches rm is denied by an `rm *` deny rule.
func TestBypassCorpus(t *testing.T) {
	corpus := loadCorpus(t)
	if len(corpus) < 150 {
		t.Fatalf("the corpus has %d lines, want at least 150", len(corpus))
	}
	example, denyRm, allowAll := corpusPolicies(t)
	for _, e := range corpus {
		in := Input{Tool: "ssh_exec", Command: e.line, HasCommand: true}
		if v := example.Decide(in); v.Decision < Ask {
			t.Errorf("example policy: %q = %v (%s), want ask or deny", e.line, v.Decision, v.Reason)
		}
		want := Ask
		if e.rm {
			want = Deny
		}
		if v := denyRm.Decide(in); v.Decision < want {
			t.Errorf("deny rm *: %q = %v (%s), want %v", e.line, v.Decision, v.Reason, want)
		}
		if v := allowAll.Decide(in); v.Decision != want {
			t.Errorf("mode allow, deny rm *: %q = %v (%s), want %v", e.line, v.Decision, v.Reason, want)
		}
	}
}

// benignLines stay allowed under the README's example policy, so the
// policy stays usable.
var benignLines = []string{
	"echo hi",
	"git status",
	"git diff HEAD~1",
	"git diff --stat",
	"git diff HEAD -- '*.go'",
	"git diff --output-indicator-new=+",
	"echo $((1+2))",
	"echo $(( (2 + 3) * 4 ))",
	`echo "hi!"`,
	"echo 'hi!'",
	"echo hi!",
	`echo "a != b"`,
	"echo $!",
	"echo $HOME ${HOME} ${#HOME}",
	`echo "${x:-default}" ${x/a/b} ${x@Q} ${x:1:2}`,
	"echo ${arr[0]} ${arr[@]} ${!arr[@]} ${!pre*}",
	"FOO=1 echo x",
	"x=1; echo $x",
	"git status && echo ok",
	"echo a > /tmp/out.txt",
	"echo x >> notes.md",
	"git diff > /tmp/d.patch",
	`echo x > "$TMPDIR/out.log"`,
	"echo a 2>&1 >&2 2>/dev/null",
	"[[ -f x ]] && echo y",
	"[[ $x == y* ]] && echo z",
	"[[ -v HOME ]] && echo set",
	"[[ 3 -lt 4 ]] && echo yes",
	"echo a && echo b; echo c",
	"echo -e 'x\\ty'",
	"git status # a comment",
	`echo "$(git status)"`,
	"if git diff --quiet; then echo clean; fi",
	"for f in a b; do echo $f; done",
	"echo 'if ! x; then' | git diff --no-index - /dev/null",
	"[[ $# -eq 0 ]] && echo none",
	"echo $(( $# + ${#HOME} ))",
}

// benignAnywhere are ordinary lines that a policy allowing their
// commands allows.
var benignAnywhere = []string{
	"set -euo pipefail; git status",
	"set -x; echo hi",
	"set -- a b; echo $1",
	"set -o pipefail -o nounset",
	"cp a.txt b.txt && mv b.txt c.txt",
	"cat a | tee out.log",
	"sed -i 's/foo/bar/g' main.go",
	"sed -n '1,5p' README.md",
	"read -r line < f; echo $line",
	"printf -v x '%s' y",
	"unset x y",
	"export FOO=1 BAR=$HOME",
	"local x=1 2>/dev/null; declare -a arr=(1 2)",
	"sudo -u app git status",
	"timeout 10 flock /tmp/l make test",
	"ssh host uptime",
	"git -C repo status",
	"git config user.name",
	"git config --get core.editor",
	"find . -name '*.go' -exec gofmt -l {} +",
	"dd if=/dev/zero of=/tmp/x bs=1 count=1",
	"while IFS= read -r line; do echo \"$line\"; done < f",
	"IFS=, read -r a b <<< 'x,y'",
	"sed -n -e 's/a/b/p' -e '/x/d' f",
	"sed -E 's/(a)/\\1/g' f > out.txt",
	"[[ $? -ne 0 ]] || echo ok",
}

// TestBenignLines: ordinary lines are still allowed by the example
// policy, and by a policy that allows their commands.
func TestBenignLines(t *testing.T) {
	example, _, allowAll := corpusPolicies(t)
	for _, l := range benignLines {
		if v := example.Decide(Input{Tool: "ssh_exec", Command: l, HasCommand: true}); v.Decision != Allow {
			t.Errorf("%q = %v (%s), want allow", l, v.Decision, v.Reason)
		}
	}
	for _, l := range append(benignAnywhere, benignLines...) {
		if v := allowAll.Decide(Input{Tool: "ssh_exec", Command: l, HasCommand: true}); v.Decision != Allow {
			t.Errorf("mode allow: %q = %v (%s), want allow", l, v.Decision, v.Reason)
		}
	}
}
