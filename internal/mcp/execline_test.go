package mcp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/shell"
)

// TestNamedForItself: an exec counts as the one its line named only when
// the program is what argv[0] says; hash -p, exec -a and a symlink start
// rm under another name, and must be judged on their own.
func TestNamedForItself(t *testing.T) {
	rm, err := filepath.EvalSymlinks("/bin/rm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := filepath.Join(dir, "ls")
	if err := os.Symlink(rm, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
		argv []string
		want bool
	}{
		{"rm as rm", rm, []string{"rm", "x"}, true},
		{"rm by its path", rm, []string{rm, "x"}, true},
		{"hash -p /bin/rm lsh", rm, []string{"lsh", "x"}, false},
		{"exec -a ls rm", rm, []string{"ls", "x"}, false},
		{"a symlink named ls", link, []string{"ls", "x"}, false},
		{"no argv", rm, nil, false},
	} {
		x := shell.ExecInfo{Exec: execguard.Exec{Pid: os.Getpid(), Cwd: dir, Path: tc.path, Argv: tc.argv}}
		if got := namedForItself(x); got != tc.want {
			t.Errorf("%s: namedForItself = %v, want %v", tc.name, got, tc.want)
		}
	}
}
