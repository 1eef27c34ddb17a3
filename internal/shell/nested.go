package shell

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// A human's command that starts a shell of its own (su, sudo -i, ssh
// otherhost, bash) keeps tandem's shell waiting until the human leaves
// it: tandem's integration does not reach into the new shell, and its
// commands are not reported one by one. An agent call that finds one
// running answers ErrNestedShell, not busy: nothing is wrong with the
// session, and the human's command is reported, with its status, when
// they leave it.

// ErrNestedShell says the human's running command is a shell of its own
// (su, sudo -i, ssh otherhost): tandem cannot run commands until the
// human leaves it. It wraps ErrIntegrationLost, as for that time the
// integration is out of reach.
var ErrNestedShell = fmt.Errorf("%w for now: the human is in a shell of its own", ErrIntegrationLost)

// ChildLister is implemented by a Conn that can read the command lines
// (argv) of the shell process's children, the programs of the command
// that runs, and the shell's own: a child that has not run its program
// yet, or a subshell, shows the shell's.
type ChildLister interface {
	ShellChildren(shellPID int) (self []string, kids [][]string, err error)
}

// nestedNow looks, once, whether the human's running command is a shell
// of its own, and names it; s.mu is held, and let go during the look.
func (s *Shell) nestedNow() string {
	cl, ok := s.conn.(ChildLister)
	if !ok || s.human == nil || s.pid == 0 {
		return ""
	}
	pid, h := s.pid, s.human
	s.mu.Unlock()
	self, kids, err := cl.ShellChildren(pid)
	s.mu.Lock()
	if err != nil || s.human != h {
		return ""
	}
	for _, argv := range kids {
		if slices.Equal(argv, self) {
			continue // a fork of the shell: a subshell, or a program not started yet
		}
		if what := interactiveShell(argv); what != "" {
			return what
		}
	}
	return ""
}

// nestedError is the agent's answer while the human is in a shell of
// its own; s.mu is held.
func (s *Shell) nestedError(op, what string) error {
	return fmt.Errorf("%s: %w: the human's command `%s` runs %s, which tandem's integration does not reach: the commands typed there are not reported one by one, and yours cannot run there. When the human leaves it (exit), the session's shell is back and the command is reported with its status", op, ErrNestedShell, lastBytes(s.redactText(s.human.rec.Command), 200), what)
}

// Shells a human may start for a prompt of its own.
var shellNames = []string{"bash", "sh", "dash", "zsh", "fish", "ksh", "mksh", "tcsh", "csh", "yash", "nu", "elvish", "xonsh"}

// interactiveShell names argv when it is an interactive shell: a shell
// with no script and no -c, su without a command, sudo or doas with -i
// or -s or running such a shell, or ssh with a host and no remote
// command. Otherwise "".
func interactiveShell(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := path.Base(strings.TrimPrefix(argv[0], "-"))
	args := argv[1:]
	switch {
	case slices.Contains(shellNames, name):
		ops, opts := operands(args, "-o", "+o", "-O", "+O", "--rcfile", "--init-file")
		if slices.Contains(opts, "-c") || (len(ops) > 0 && !slices.Contains(opts, "-i") && !slices.Contains(opts, "-s")) {
			return ""
		}
		return name
	case name == "su":
		ops, opts := operands(args, "-c", "--command", "--session-command", "-s", "--shell", "-g", "--group", "-G", "--supp-group", "-w", "--whitelist-environment")
		if hasAny(opts, "-c", "--command", "--session-command") || len(ops) > 1 {
			return ""
		}
		return "su"
	case name == "sudo" || name == "doas":
		ops, opts := operands(args, "-u", "--user", "-g", "--group", "-h", "--host", "-p", "--prompt", "-C", "--close-from", "-D", "--chdir", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T", "--command-timeout", "-a")
		if len(ops) == 0 {
			switch {
			case hasAny(opts, "-i", "--login"):
				return name + " -i"
			case hasAny(opts, "-s", "--shell"):
				return name + " -s"
			}
			return ""
		}
		if inner := interactiveShell(ops); inner != "" {
			return name + " " + inner
		}
		return ""
	case name == "ssh":
		ops, opts := operands(args, "-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p", "-Q", "-R", "-S", "-W", "-w")
		if len(ops) != 1 || hasAny(opts, "-N", "-W", "-O", "-V", "-G", "-Q") {
			return ""
		}
		return "ssh " + ops[0]
	}
	return ""
}

// operands splits args into the options before the first operand (each
// option of withArg takes the next argument, which is dropped) and the
// operands from there on. Bundled short flags (-il) count one by one.
func operands(args []string, withArg ...string) (ops, opts []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:], opts
		case a == "-" || !(strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")):
			// "su -" is a login: an option, not an operand.
			if a == "-" {
				opts = append(opts, "-l")
				continue
			}
			return args[i:], opts
		case strings.HasPrefix(a, "--"):
			name, _, inline := strings.Cut(a, "=")
			opts = append(opts, name)
			if !inline && slices.Contains(withArg, name) {
				i++
			}
		default:
			for j := 1; j < len(a); j++ {
				f := a[:1] + a[j:j+1]
				opts = append(opts, f)
				if slices.Contains(withArg, f) {
					if j == len(a)-1 {
						i++ // its argument is the next word
					}
					break // the rest of the word is its argument
				}
			}
		}
	}
	return nil, opts
}

func hasAny(opts []string, names ...string) bool {
	for _, n := range names {
		if slices.Contains(opts, n) {
			return true
		}
	}
	return false
}
