package sshconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tandem-sh/tandem/internal/shell"
)

// Over SSH tandem sees the terminal's processes only from the server's
// side. inputScript, run on a channel of its own, prints what
// shell.WaitsForInput needs about the foreground process group of the
// terminal of shell $1, one fact a line:
//
//	m MACHINE       uname -m: which system call numbers apply
//	r               the terminal is out of canonical mode (stty)
//	t PID S SYSCALL a thread: its state letter and its syscall file
//	f PID FD        descriptor FD of PID is the terminal
//	e PID FD        epoll descriptor FD of PID watches the terminal
//
// It finds the group's processes with pgrep -g, or by reading every
// /proc/PID/stat where pgrep is missing; the group may be the shell's own
// (a builtin such as read). It prints nothing when the terminal has no
// foreground group. /proc/PID/task/TID/syscall
// needs ptrace access: the login's own processes, as root, or with Yama's
// ptrace_scope at 0; where it is unreadable the answer is unknown.
const inputScript = `s=$1; tty=/proc/$s/fd/0
IFS= read -r l </proc/$s/stat || exit 1
set -f; set -- ${l##*\)}; set +f; g=$6
[ "$g" -gt 0 ] 2>/dev/null || exit 0
echo "m $(uname -m)"
case $(command -p stty -a <"$tty" 2>/dev/null) in *-icanon*) echo r;; esac
ps=$(command -p pgrep -g "$g" 2>/dev/null) || ps=$(cd /proc && for d in [0-9]*; do IFS= read -r l <"$d/stat" 2>/dev/null || continue; set -f; set -- ${l##*\)}; set +f; [ "$3" = "$g" ] && echo "$d"; done)
isterm() { [ "$1" -ef "$tty" ] || [ "$1" -ef /dev/tty ]; }
for p in $ps; do
  for f in /proc/$p/fd/*; do isterm "$f" && echo "f $p ${f##*/}"; done
  for f in /proc/$p/fdinfo/*; do
    while read -r k v _; do
      if [ "$k" = tfd: ] && isterm "/proc/$p/fd/$v"; then echo "e $p ${f##*/}"; break; fi
    done <"$f" 2>/dev/null
  done
  for t in /proc/$p/task/*; do
    IFS= read -r l <"$t/stat" 2>/dev/null || continue
    set -f; set -- ${l##*\)}; set +f
    c=; IFS= read -r c <"$t/syscall" 2>/dev/null
    echo "t $p $1 $c"
  done
done`

var _ shell.ShellInputWaiter = (*conn)(nil)

// WaitingForInputOf reports whether the command in the foreground of the
// terminal of shell shellPID waits for keys (see shell.WaitsForInput),
// from inputScript run by the conn's helper (one round trip and a few
// forks, no login), or on a channel of its own while the helper is down.
func (c *conn) WaitingForInputOf(ctx context.Context, shellPID int) (bool, error) {
	if shellPID <= 0 {
		return false, fmt.Errorf("sshconn: waiting for input: invalid pid %d", shellPID)
	}
	var out []byte
	a, err := c.question(ctx, "input", shellPID, "")
	switch {
	case err == nil && a.err != "":
		err = errors.New(a.err)
	case err == nil:
		if len(a.data) > 0 {
			out = []byte(strings.Join(a.data, "\n") + "\n")
		}
	case errors.Is(err, errHelperDown):
		out, err = c.exec(ctx, "exec sh -c "+shellQuote(inputScript)+" tandem-input "+strconv.Itoa(shellPID))
	}
	if err != nil {
		return false, fmt.Errorf("sshconn: waiting for input of shell %d: %w", shellPID, err)
	}
	w, err := parseInput(out)
	if err != nil {
		return false, fmt.Errorf("sshconn: waiting for input of shell %d: %w", shellPID, err)
	}
	return w, nil
}

// parseInput decides from inputScript's output.
func parseInput(out []byte) (bool, error) {
	if len(bytes.TrimSpace(out)) == 0 {
		return false, nil // the shell holds the terminal: no command waits
	}
	p := shell.ForegroundProcs{TermFDs: map[int]map[int]bool{}, EpollTerm: map[int]map[int]bool{}}
	machine := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "m" && len(f) == 2:
			machine = f[1]
		case f[0] == "r":
			p.Raw = true
		case f[0] == "t" && len(f) >= 3:
			pid, err := strconv.Atoi(f[1])
			if err != nil || len(f[2]) != 1 {
				return false, fmt.Errorf("malformed line %q", sc.Text())
			}
			p.Tasks = append(p.Tasks, shell.ForegroundTask{PID: pid, State: f[2][0], Syscall: strings.Join(f[3:], " ")})
		case (f[0] == "f" || f[0] == "e") && len(f) == 3:
			pid, err1 := strconv.Atoi(f[1])
			fd, err2 := strconv.Atoi(f[2])
			if err1 != nil || err2 != nil {
				return false, fmt.Errorf("malformed line %q", sc.Text())
			}
			m := p.TermFDs
			if f[0] == "e" {
				m = p.EpollTerm
			}
			if m[pid] == nil {
				m[pid] = map[int]bool{}
			}
			m[pid][fd] = true
		default:
			return false, fmt.Errorf("malformed line %q", sc.Text())
		}
	}
	table, ok := shell.SyscallsFor(machine)
	if !ok {
		return false, fmt.Errorf("no system call table for the server's machine %q", machine)
	}
	w, known := shell.WaitsForInput(p, table)
	if !known {
		return false, fmt.Errorf("the server's /proc/PID/task/TID/syscall is unreadable (ptrace access)")
	}
	return w, nil
}
