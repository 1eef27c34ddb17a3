package shell

import (
	"bytes"
	"strconv"
)

// ProgramReporter is implemented by a Conn that can see who holds the
// terminal of the shell shellPID (a local PTY can; over SSH, the server's
// /proc can). A Ctrl-C for the agent's command is pressed only once a
// program of it can take one: pressed earlier it reaches bash, which is
// waiting for a child and ignores it, or a forked child that has not yet
// left bash's own SIGINT handler, which swallows it.
type ProgramReporter interface {
	// InterruptReady reports whether the shell itself holds the
	// terminal (shell), or a program that takes a Ctrl-C (ready).
	InterruptReady(shellPID int) (shell, ready bool, err error)
}

// TakesInterrupt reports, from /proc/PID/status of the shell and of the
// leader of the process group that holds the terminal, whether the leader
// takes a Ctrl-C: it runs another program (it exec'd), or it no longer
// catches SIGINT (a forked bash restores the default before it execs).
// A leader that has gone (empty status) takes it: the group's other
// members run programs.
func TakesInterrupt(shellStatus, leaderStatus []byte) bool {
	name, caught, ok := interruptState(leaderStatus)
	if !ok {
		return true
	}
	if own, _, ok := interruptState(shellStatus); !ok || own != name {
		return true
	}
	return !caught
}

// interruptState reads Name and whether SIGINT is caught (SigCgt) from a
// /proc/PID/status.
func interruptState(status []byte) (name string, caught, ok bool) {
	var sawName, sawMask bool
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		key, val, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		val = bytes.TrimSpace(val)
		switch string(key) {
		case "Name":
			name, sawName = string(val), true
		case "SigCgt":
			mask, err := strconv.ParseUint(string(val), 16, 64)
			if err != nil {
				return "", false, false
			}
			caught, sawMask = mask&(1<<(2-1)) != 0, true // SIGINT is 2
		}
	}
	return name, caught, sawName && sawMask
}
