package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often session membership is re-read while waiting
// for processes to die.
const pollInterval = 10 * time.Millisecond

// procStat is the part of /proc/PID/stat this package needs.
type procStat struct {
	state byte // R, S, D, Z, T, ...
	pgrp  int
	sid   int
}

// readStat parses /proc/PID/stat. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// After ") ": state ppid pgrp session ...
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	sid, err2 := strconv.Atoi(string(f[3]))
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, sid: sid}, nil
}

// live reports whether the process still runs code (zombies and dead
// tasks only wait to be reaped and cannot be signalled meaningfully).
func (s procStat) live() bool { return s.state != 'Z' && s.state != 'X' }

// sessionMembers lists the live processes whose session id is sid.
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		if st, err := readStat(pid); err == nil && st.sid == sid && st.live() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// signalSession sends sig to every live process of session sid and
// returns how many it signalled. Each target is pinned with a pidfd and
// its session re-checked through it, so a pid reused by an unrelated
// process between the scan and the signal is never hit.
func signalSession(sid int, sig unix.Signal) int {
	n := 0
	for _, pid := range sessionMembers(sid) {
		pfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // exited since the scan
		}
		if st, err := readStat(pid); err == nil && st.sid == sid && st.live() {
			if unix.PidfdSendSignal(pfd, sig, nil, 0) == nil {
				n++
			}
		}
		_ = unix.Close(pfd)
	}
	return n
}

// waitSessionEmpty polls until session sid has no live process or d has
// passed, and reports whether it emptied.
func waitSessionEmpty(sid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(sessionMembers(sid)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
}
