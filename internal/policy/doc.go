// Package policy decides what an agent may do: run an action unwatched
// (Allow), send it upstream for approval (Forward), wait for the local
// human (Ask), or never run it (Deny).
//
// An operator's policy is a mode and a list of rules. A rule names a tool,
// a command pattern, or both, and a decision. For a command tool (ssh_exec,
// Bash) the command is parsed as bash, not string-matched: every simple
// command in it is found (after &&, ||, ;, pipes, inside subshells, blocks,
// $(…), backticks, <(…), redirect targets, assignments, function bodies,
// conditions and loops), common wrappers are unwrapped (sudo, doas, env,
// nice, timeout, nohup, time, command, builtin, exec, xargs, stdbuf, ionice,
// chrt, taskset, setsid, su -c, and bash/sh/dash/zsh/ksh -c with the
// script parsed in turn), find -exec and trap handlers are judged too, and
// each simple command is judged on its own. The whole is the strictest of
// its parts, so one denied command denies the command line.
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
//     call to it is judged by its name.
//   - PATH lookups are not resolved: `rm` and `./rm` are both judged as rm,
//     and a pattern naming /usr/bin/rm does not match a bare `rm`.
//   - Globs in arguments are matched as written (`rm *.o`), not expanded;
//     a command word with glob characters fails closed.
//   - Only the wrappers listed above are unwrapped. Commands run by other
//     programs (ssh host cmd, make, git hooks, scripts run by file name,
//     PROMPT_COMMAND, BASH_ENV) are not seen.
//   - Words a wrapper reads at run time (xargs input) and words with
//     expansions are treated as unknown.
package policy
