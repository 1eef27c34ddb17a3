package policy

import (
	"path"
	"strings"
)

// A multi-call program is one binary that does what its name, or its
// first argument, says: git run as git-push pushes (git's own
// git-core/git-<sub> links), busybox and toybox run the applet named by
// argv[0] or argv[1]. One table serves the line judge and exec judging,
// so that `/usr/lib/git-core/git-push` is judged as `git push` in a
// command line and as the program starts.

// multiCall returns the argv a multi-call program's argv is judged as,
// by the base name of its command word; ok is false for any other
// program.
func multiCall(argv []word) (out []word, ok bool) {
	if len(argv) == 0 || !argv[0].lit {
		return nil, false
	}
	name := path.Base(argv[0].s)
	if sub, found := strings.CutPrefix(name, "git-"); found && sub != "" {
		// git run as git-<sub> runs `git <sub>` (git.c: cmd_main).
		git := word{s: "git", pre: "git", lit: true}
		return append([]word{git, {s: sub, pre: sub, lit: true}}, argv[1:]...), true
	}
	if mc, found := multiCalls[name]; found {
		return mc(argv)
	}
	return nil, false
}

// multiCalls maps a multi-call program's name to how it reads its argv.
var multiCalls = map[string]func([]word) ([]word, bool){
	"busybox":   appletArg,
	"toybox":    appletArg,
	"coreutils": coreutilsArg,
}

// appletArg: busybox applet args… (busybox --list, --install, --help run
// no applet).
func appletArg(argv []word) ([]word, bool) {
	if len(argv) < 2 || argv[1].lit && strings.HasPrefix(argv[1].s, "-") {
		return nil, false
	}
	return argv[1:], true
}

// coreutilsArg: coreutils --coreutils-prog=NAME args… (GNU's single
// binary), or coreutils NAME args… (uutils).
func coreutilsArg(argv []word) ([]word, bool) {
	if len(argv) < 2 || !argv[1].lit {
		return appletArg(argv)
	}
	if prog, ok := strings.CutPrefix(argv[1].s, "--coreutils-prog="); ok {
		return append([]word{{s: prog, pre: prog, lit: true}}, argv[2:]...), true
	}
	return appletArg(argv)
}
