// Package policy decides what an agent may do: run an action unwatched
// (Allow), send it upstream for approval (Forward), wait for the local
// human (Ask), or never run it (Deny).
//
// An operator's policy is a mode and a list of rules. A rule names a tool,
// a command pattern, or both, and a decision. For a command tool (ssh_exec,
// Bash) the command is parsed as bash, not string-matched: every simple
// command in it is found (after &&, ||, ;, pipes, inside subshells, blocks,
// $(…), backticks, <(…), redirect targets, assignments, function bodies,
// conditions and loops), wrappers are unwrapped and what they run is
// judged in turn, find -exec, trap handlers, alias values and git -c
// alias.x=!… scripts are judged too, and each simple command is judged on
// its own. The whole is the strictest of its parts, so one denied command
// denies the command line.
//
// The wrappers: sudo, doas, su -c, runuser, pkexec, env (and env -S),
// nice, nohup, timeout, time, command, builtin, exec, xargs, stdbuf,
// ionice, chrt, taskset, setsid, chroot, flock, setpriv, unshare, script
// -c, scriptlive, nsenter, setarch (linux32, linux64, …), prlimit, runcon,
// uclampset, choom, enosys, pipesz, watch, parallel and sem (GNU and
// moreutils), chronic, ifne, lckdo, pee, mispipe, zrun, numactl, cgexec,
// firejail, faketime, catchsegv, valgrind, strace, ltrace, gdb --args,
// dbus-run-session, systemd-run, sg, entr, hyperfine, xvfb-run,
// fakeroot, eatmydata, torsocks, proxychains, unbuffer, sshpass, ccache,
// distcc, caffeinate, ssh host cmd (the command is judged as a script),
// bash/sh/dash/zsh/ksh/mksh/ash -c with the script parsed in turn, and the
// dynamic loader (ld-linux*.so*, ld-*.so*, ld64.so*, ld.so: loader.go),
// which runs its program without an exec of its own. Their options are
// known in full: an option a wrapper does not know, or one that is not a
// literal, fails closed. Multi-call programs (multicall.go) are judged as
// the command their name or first argument says: git-<sub> (git's
// git-core links) as git <sub>, busybox, toybox and coreutils applets as
// the applet; the same table serves exec judging.
//
// Exec judging (DecideExec, exec.go) judges one program as it starts, by
// its exact argv, and what it runs: a #! script as its interpreter, the
// interpreter's argument, the script and the arguments (nested as the
// kernel nests them); the loader's program; a multi-call name. It learns
// what a file is through Exec.Look, which the caller answers in the view
// of the process that execs. What starts a shell that reads
// its input (ssh host, su, script, unshare, chroot, nsenter, newgrp, sudo
// -i, curl … | sh), or runs what cannot be judged here (expect, bwrap,
// rlwrap, tmux and screen with arguments, at, batch, direnv exec), fails
// closed.
//
// What bash runs must be what was judged, so these ask (or stay denied
// under a deny rule or mode) even when everything else on the line is
// allowed:
//
//   - History expansion: a '!' that starts a history designator outside
//     single quotes, or a line starting with '^'. tandem's shells run with
//     set +H; this is defence in depth.
//   - Assignments, alone, before a command, through env, sudo,
//     systemd-run -E, strace -E or firejail --env, with
//     export/declare/typeset/local/readonly, or by read, mapfile, printf -v,
//     getopts, wait -p and for, to variables that make the shell or a
//     program run code or read configuration: PROMPT_COMMAND, PS0–PS4,
//     BASH_ENV, ENV, PATH, IFS, SHELLOPTS, BASHOPTS, CDPATH, HOME,
//     XDG_CONFIG_HOME, SHELL, histchars, HISTFILE, INPUTRC, LD_*, DYLD_*,
//     GIT_*, BASH_FUNC_*, PAGER, *_PAGER, *EDITOR, VISUAL, BROWSER,
//     *_ASKPASS, LESSOPEN, LESSCLOSE, PERL5OPT, PERL5LIB, PYTHONSTARTUP,
//     PYTHONPATH, PYTHONHOME, RUBYOPT, NODE_OPTIONS, NODE_PATH,
//     JAVA_TOOL_OPTIONS, TAR_OPTIONS, MAKEFLAGS, RSYNC_RSH, NPM_CONFIG_*,
//     BASH_ALIASES, BASH_CMDS, MAILPATH and a few more (execVars); also
//     {name}> redirections that assign them. IFS=value before read,
//     mapfile or readarray is allowed: it only splits what they read.
//   - Words bash evaluates as code: arithmetic ($((…)), ((…)), let, for
//     ((…)), $[…], [[ -eq … ]], ${x:off:len}) on anything but numbers,
//     subscripts that are not numbers (a[i]=, ${a[i]}, ([i]=v)), ${!x},
//     ${x@P}, [[ -v ]] and test -v on anything but a plain name,
//     declare/typeset/local with -i or -n or from a word that is not a
//     literal, names with subscripts given to read, printf -v, unset,
//     mapfile, getopts and wait -p, and mapfile -C.
//   - Builtins that change what later lines run or how they are read:
//     shopt, set with options other than -e -u -x -v -f -C and -o
//     errexit/nounset/xtrace/verbose/noglob/noclobber/pipefail, enable,
//     hash (hash -p PATH NAME is also judged as PATH), alias (the value is
//     judged as a script), unalias, bind, trap, complete, compgen, fc.
//     After shopt, what follows a '#' is judged too.
//   - Writes (>, >>, >|, <>, &>, &>>, >&file, tee, cp, mv, install, ln,
//     rsync, scp, truncate, sponge, dd of=, sed -i, git --output) to files
//     that a shell or git runs or reads as configuration, judged on the
//     path's tail since the working directory is not known: shell rc and
//     profile files (.bashrc, .bash_*, .profile, .zsh*, .inputrc, …),
//     /etc's profile, bash and cron files, anything under .git, .ssh,
//     .husky, hooks, profile.d and systemd directories, git hook names,
//     .gitconfig, .gitattributes, .gitmodules, .envrc, .npmrc, *.pth,
//     sitecustomize.py; and writes to a file whose name is only known when
//     it runs, unless its known tail names an ordinary file (out/$x.log).
//   - git -c, --config-env and --exec-path; git config that writes; git
//     options that run a program they name (grep -O, rebase -x, clone -u,
//     --upload-pack, submodule foreach, bisect run, filter-branch, …); and
//     such options of common commands (sort --compress-program, rg --pre,
//     tar --to-command and -I, rsync -e, ssh -o ProxyCommand, man -P,
//     sed's e and w commands, vim -c, fd -x, strace -o '|cmd', …).
//
// Where every program is judged as it starts (Input.ExecJudged: a
// sandboxed local session), a line that asks only because its judge cannot
// see which programs it runs need not ask: source and ., eval, set options
// that change only what runs (-a, -h, -k, -B, -H, -P and their -o names),
// assignments to execVars other than PROMPT_COMMAND and PS0–PS4, alias,
// arithmetic and subscripts on variables, ${!x} and ${x@P}, git config
// that writes, and a history designator. Whatever such a line runs, it
// runs as a program that DecideExec judges with the same rules, so it
// keeps the decision of its words (mode allow) unless some deny, ask or
// forward command rule names a builtin or keyword (or its command word is
// a glob that matches one), which no exec enforces (execseen.go). Writes
// to the files above, the other builtins above, prompt variables, a word
// naming a variable only known at run time and unparsable lines ask there
// too. wait's operands are job specs and process ids (%1), never names.
//
// A pattern is a command written with shell quoting, whose words are globs
// matched against the argv words, anchored at both ends: `git status`
// matches exactly `git status`; a word that is exactly * matches any number
// of whole words, so `git status *` also matches `git status -s`. The
// command word also matches by base name: `rm -rf *` covers `/bin/rm -rf /`.
//
// What cannot be judged before it runs fails closed to Ask (or stays Deny
// if the rules or mode say Deny): a command word that is not literal
// ($cmd, $(which rm)), eval, source and ., a bash -c whose script is not
// literal, a shell that reads commands from its input (curl … | sh, sudo -i),
// xargs taking the command itself from its input, scripts nested more than
// 8 deep, unparsable commands, commands over 256 KiB, and parentheses
// nested more than 256 deep. An argument that is not literal (rm -rf $DIR)
// satisfies an allow rule only if the rule would match whatever it expands
// to; if a deny, ask or forward rule might match it, the command is Ask.
//
// A rule whose command is a wrapper (`sudo *`) is also matched against the
// wrapper's own argv, but it can only make the decision stricter: an allow
// rule for `sudo *` does not allow what sudo runs.
//
// Command rules guard against mistakes, not against a hostile agent. A
// determined agent can get around any static check of shell code; the
// sandbox and the target account's own permissions are the security
// boundary. Known limits:
//
//   - Patterns compare argv words, not meaning: `rm -fr` and `rm -r -f` are
//     different argv from `rm -rf`, and options may be reordered or
//     abbreviated; write a rule per spelling, or use `rm *`.
//   - Aliases and functions defined in an earlier command are not known;
//     a function defined in the same command has its body judged, and a
//     call to it is judged by its name. State an earlier, approved command
//     left behind (declare -i x, a variable exported to a later program, a
//     cd into .git) is not known either.
//   - PATH lookups are not resolved: `rm` and `./rm` are both judged as rm,
//     and a pattern naming /usr/bin/rm does not match a bare `rm`.
//   - Globs in arguments are matched as written (`rm *.o`), not expanded;
//     a command word with glob characters fails closed.
//   - Programs run code the parser never sees: interpreters (python -c,
//     awk, perl), make, scripts run by file name, git hooks and config
//     already in a repository (git -C dir, or cd into one, then git status
//     runs that repository's core.fsmonitor), and files written by programs
//     other than those listed above (an editor, a compiler, an archive
//     extracted into .git/hooks).
//   - Writes are judged on the path as written: a symlink made earlier, or
//     a cd into .git followed by a write to config, is not seen.
//   - ssh's remote command is judged as bash, whatever the remote user's
//     shell is.
//   - Words a wrapper reads at run time (xargs input) and words with
//     expansions are treated as unknown.
package policy
