package sandbox

import (
	"path/filepath"
	"testing"
)

// TestFilesCommandRefuses: a file server's policy takes no descriptors
// and no seccomp filter, and paths must be absolute; the launcher refuses
// the same before serving anything.
func TestFilesCommandRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		self string
		p    Policy
		dir  string
	}{
		{"exec filter", self, Policy{ReadWrite: []string{dir}, ExecFD: 3}, dir},
		{"proxy", self, Policy{ReadWrite: []string{dir}, Namespace: true, ProxyFD: 4, ProxyPort: 9}, dir},
		{"seccomp fallback", self, Policy{ReadWrite: []string{dir}, NetFilter: true}, dir},
		{"relative dir", self, Policy{ReadWrite: []string{dir}}, "ws"},
		{"relative launcher", "tandem", Policy{ReadWrite: []string{dir}}, dir},
		{"relative grant", self, Policy{ReadWrite: []string{"ws"}}, dir},
	} {
		if _, err := FilesCommand(tc.self, tc.p, tc.dir); err == nil {
			t.Errorf("%s: FilesCommand accepted it", tc.name)
		}
	}
	for _, args := range [][]string{
		{filesArg},
		{filesArg, `{}`},
		{filesArg, `not json`, dir},
		{filesArg, `{"execfd":3}`, dir},
		{filesArg, `{"rw":["` + filepath.Join(dir, "x") + `"],"bogus":1}`, dir},
	} {
		if code := Main(args); code != exitRefused {
			t.Errorf("Main(%q) = %d, want %d", args, code, exitRefused)
		}
	}
}
