package execguard_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/execguard"
)

// TestParseShebang: the #! line is read as the kernel's binfmt_script
// reads it: one interpreter word, then the rest of the line (blanks
// trimmed) as one argument, within 256 bytes.
func TestParseShebang(t *testing.T) {
	long := "#!/bin/sh " + strings.Repeat("a", 300) + "\n"
	cutName := "#!" + strings.Repeat("b", 300)
	for _, tt := range []struct {
		name, head  string
		interp, arg string
		hasArg, ok  bool
	}{
		{"sh", "#!/bin/sh\necho hi\n", "/bin/sh", "", false, true},
		{"rm -f", "#!/bin/rm -f\n", "/bin/rm", "-f", true, true},
		{"one argument, blanks kept inside", "#!/usr/bin/git  push  origin main \t\n", "/usr/bin/git", "push  origin main", true, true},
		{"blanks before the interpreter", "#! \t/usr/bin/env python3\n", "/usr/bin/env", "python3", true, true},
		{"tab separator", "#!/bin/rm\t-rf\n", "/bin/rm", "-rf", true, true},
		{"no newline, short file", "#!/bin/sh", "/bin/sh", "", false, true},
		{"no newline, argument", "#!/bin/rm -f", "/bin/rm", "-f", true, true},
		{"trailing blanks only", "#!/bin/sh   \n", "/bin/sh", "", false, true},
		{"carriage return is part of the name", "#!/bin/sh\r\n", "/bin/sh\r", "", false, true},
		{"NUL ends the interpreter", "#!/bin/rm\x00-f\n", "/bin/rm", "", false, true},
		{"NUL inside the argument", "#!/bin/rm -f\x00x\n", "/bin/rm", "-f", true, true},
		{"argument cut at 256 bytes", long, "/bin/sh", strings.Repeat("a", 256-len("#!/bin/sh ")-1), true, true},
		{"interpreter name cut: refused", cutName, "", "", false, false},
		{"empty line", "#!\n", "", "", false, false},
		{"#! alone", "#!", "", "", false, false},
		{"no newline: trailing blanks stay", "#!/bin/rm -f ", "/bin/rm", "-f ", true, true},
		{"blanks only", "#!   \t \n", "", "", false, false},
		{"not a script", "\x7fELF\x02\x01", "", "", false, false},
		{"one byte", "#", "", "", false, false},
		{"empty", "", "", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			interp, arg, hasArg, ok := execguard.ParseShebang([]byte(tt.head))
			if interp != tt.interp || arg != tt.arg || hasArg != tt.hasArg || ok != tt.ok {
				t.Errorf("ParseShebang(%q) = %q, %q, %v, %v; want %q, %q, %v, %v", tt.head, interp, arg, hasArg, ok, tt.interp, tt.arg, tt.hasArg, tt.ok)
			}
		})
	}
}

// FuzzParseShebang: whatever a file starts with, the parser never panics,
// never reads past 256 bytes, and returns words without NUL, newline or
// the blanks that separate them, as the kernel would.
func FuzzParseShebang(f *testing.F) {
	for _, s := range []string{"#!/bin/sh\n", "#!/bin/rm -f", "#! /usr/bin/env  a b \n", "#!\n", "#!" + strings.Repeat(" ", 300), "#!/x\x00y z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		interp, arg, hasArg, ok := execguard.ParseShebang(b)
		if !ok {
			if interp != "" || arg != "" || hasArg {
				t.Fatalf("not ok but %q %q %v", interp, arg, hasArg)
			}
			return
		}
		if len(b) < 2 || b[0] != '#' || b[1] != '!' {
			t.Fatalf("ok for %q", b)
		}
		if interp == "" || strings.ContainsAny(interp, " \t\x00\n") {
			t.Fatalf("interpreter %q from %q", interp, b)
		}
		if !hasArg && arg != "" || strings.ContainsAny(arg, "\x00\n") || strings.HasPrefix(arg, " ") || strings.HasPrefix(arg, "\t") {
			t.Fatalf("argument %q (%v) from %q", arg, hasArg, b)
		}
		// Trailing blanks are trimmed from a line that ends within the
		// buffer and holds no NUL (the kernel trims only before the end).
		nl := bytes.IndexByte(b[:min(len(b), 256)], '\n')
		if nl >= 0 && bytes.IndexByte(b[:nl], 0) < 0 && (strings.HasSuffix(arg, " ") || strings.HasSuffix(arg, "\t")) {
			t.Fatalf("argument %q keeps its trailing blanks, from %q", arg, b)
		}
		// Only the first 256 bytes count.
		if len(b) > 256 {
			i2, a2, h2, ok2 := execguard.ParseShebang(b[:256])
			if i2 != interp || a2 != arg || h2 != hasArg || !ok2 {
				t.Fatalf("bytes past 256 changed the result for %q", b)
			}
		}
	})
}

// TestLookInTheProcess: Look resolves /dev/fd/N, /proc/self/fd/N and
// relative paths in the process that made the exec, never in tandem: a
// child holds git on its descriptor 9 while the test's own 9 is another
// file; symlinks are followed, and a #! script's interpreter is read.
func TestLookInTheProcess(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	gitReal, err := filepath.EvalSymlinks(git)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "s")
	if err := os.WriteFile(script, []byte("#!/bin/rm -f\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(git, filepath.Join(dir, "x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/fd/9", filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	// The test's own descriptors: fill 0..9 so that its 9 is not git.
	mine, err := os.Open(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mine.Close() })
	gf, err := os.Open(git)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	cmd := exec.Command("sleep", "60")
	cmd.Dir = dir
	// ExtraFiles[i] is the child's descriptor 3+i.
	cmd.ExtraFiles = []*os.File{nil, nil, nil, nil, nil, nil, gf}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	e := execguard.Exec{Pid: cmd.Process.Pid, Cwd: dir}
	for _, tt := range []struct {
		path     string
		resolved string
		shebang  []string
	}{
		{"/dev/fd/9", gitReal, nil},
		{"/proc/self/fd/9", gitReal, nil},
		{"/proc/thread-self/fd/9", gitReal, nil},
		{"/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fd/9", gitReal, nil},
		{"x", gitReal, nil},
		{"y", gitReal, nil},
		{"./s", script, []string{"/bin/rm", "-f"}},
		{"/proc/self/cwd/s", script, []string{"/bin/rm", "-f"}},
	} {
		r, sh, err := e.Look(tt.path)
		if err != nil || r != tt.resolved || !slices.Equal(sh, tt.shebang) {
			t.Errorf("Look(%q) = %q, %q, %v; want %q, %q", tt.path, r, sh, err, tt.resolved, tt.shebang)
		}
	}
	for _, missing := range []string{"/dev/fd/42", "nothere", "s/x", "/dev/stdin/../fd/9"} {
		if _, _, err := e.Look(missing); err == nil {
			t.Errorf("Look(%q) found a file", missing)
		}
	}
}
