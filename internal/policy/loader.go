package policy

import (
	"path"
	"strings"
)

// The dynamic loader runs a program without an exec of its own:
// `ld.so [options] PROGRAM ARGS` maps PROGRAM into its own process and
// jumps to it, so neither the line judge nor exec judging sees PROGRAM
// start unless the loader is read as a wrapper. Its options are those of
// glibc's ld.so and musl's (a union: an option either knows is skipped
// as it skips it).

// isLoader reports whether a command word names a dynamic loader:
// ld-linux*.so*, ld-*.so* (ld-musl-x86_64.so.1, the old ld-2.31.so),
// ld64.so*, or ld.so itself.
func isLoader(name string) bool {
	b := path.Base(name)
	return b == "ld.so" || strings.HasPrefix(b, "ld64.so") ||
		strings.HasPrefix(b, "ld-") && strings.Contains(b, ".so")
}

// loaderOpts lists the loader's options; true if it takes a value (the
// next word, or after '=' as musl allows).
var loaderOpts = map[string]bool{
	"library-path": true, "inhibit-rpath": true, "audit": true, "preload": true, "argv0": true,
	"glibc-hwcaps-prepend": true, "glibc-hwcaps-mask": true,
	"inhibit-cache": false, "list": false, "verify": false, "list-tunables": false,
	"list-diagnostics": false, "help": false, "version": false,
}

// loaderQuiet lists the options with which the loader runs no program:
// it lists, verifies or prints, and exits.
var loaderQuiet = map[string]bool{
	"list": true, "verify": true, "list-tunables": true, "list-diagnostics": true, "help": true, "version": true,
}

// loaderArgs finds the program a loader's argv runs. k is the index of
// the program's path; argv0, when set, is the --argv0 the program gets in
// its place. With none (a listing mode, no program, a value option
// missing its value) run is false. An option neither loader knows, or
// one that is not a literal, makes known false: where the program
// starts is then not known.
func loaderArgs(argv []word) (k int, argv0 *word, run, known bool) {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if !a.lit {
			if strings.HasPrefix(a.pre, "-") || a.pre == "" {
				return 0, nil, false, false
			}
			return i, argv0, true, true // the program's path is not a literal
		}
		if !strings.HasPrefix(a.s, "--") {
			return i, argv0, true, true // glibc runs even "-x" as a program
		}
		if a.s == "--" {
			// musl ends its options here; glibc refuses the word. The
			// stricter reading judges what follows as the program.
			if i+1 < len(argv) {
				return i + 1, argv0, true, true
			}
			return 0, nil, false, true
		}
		name, val, hasVal := strings.Cut(a.s[2:], "=")
		takes, ok := loaderOpts[name]
		if !ok {
			return 0, nil, false, false
		}
		if loaderQuiet[name] {
			return 0, nil, false, true
		}
		if !takes || hasVal {
			if name == "argv0" {
				argv0 = &word{s: val, pre: val, lit: true}
			}
			continue
		}
		if i+1 >= len(argv) {
			return 0, nil, false, true // the loader refuses it and runs nothing
		}
		i++
		if name == "argv0" {
			argv0 = &argv[i]
		}
	}
	return 0, nil, false, true
}

// unwrapLoader is the line judge's wrapper for a loader: the program and
// its arguments are judged as if started by themselves, and, with
// --argv0, as the name it is given too (a multi-call program such as git
// or busybox runs what that name says).
func unwrapLoader(c *collector, argv []word) unwrapped {
	k, argv0, run, known := loaderArgs(argv)
	switch {
	case !known:
		return unknown("the dynamic loader's options are not all known, so the program it runs is not")
	case !run:
		return nothing
	}
	if argv0 != nil && c != nil {
		named := append([]word{*argv0}, argv[k+1:]...)
		c.simple(named, argv, c.depth, maxWrappers-1)
	}
	return unwrapped{kind: runsArgv, argv: argv[k:]}
}
