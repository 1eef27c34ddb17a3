// Package fdpass hands one open descriptor from a launcher process to
// tandem over a socket pair (SCM_RIGHTS). The sandbox launcher makes
// things tandem must own but only the launcher can make (the exec filter's
// listener, a listening socket inside the session's network namespace)
// and passes each over a pair of its own.
//
// It knows descriptors and sockets, not what they are for.
package fdpass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Pair returns the two ends of a socket that carries one descriptor from
// the launcher to tandem, named for what they carry. tandem keeps parent
// and passes child to the launcher (an exec.Cmd ExtraFile), closing its
// own copy of child once the launcher has started. Both are close-on-exec,
// so the shell inherits neither.
func Pair(name string) (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: socketpair: %w", name, err)
	}
	// tandem's end is non-blocking, so that os.NewFile puts it in the
	// runtime's poller and Receive's deadline can end the wait; the
	// launcher's end stays blocking.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		_ = unix.Close(fds[1])
		return nil, nil, fmt.Errorf("%s: socketpair: %w", name, err)
	}
	return os.NewFile(uintptr(fds[0]), name+"-parent"), os.NewFile(uintptr(fds[1]), name+"-child"), nil
}

// Send passes fd over sock (the launcher's end of a Pair). It never waits
// for tandem; the caller closes both afterwards.
func Send(sock, fd int) error {
	return unix.Sendmsg(sock, []byte{'F'}, unix.UnixRights(fd), nil, 0)
}

// ErrNotSent is returned by Receive when the launcher exited (closed its
// end) without sending: it refused to run its program.
var ErrNotSent = errors.New("the launcher exited without sending it")

// Receive reads the one descriptor sent on parent, waiting until ctx
// ends. The descriptor is close-on-exec and the caller's to close.
func Receive(ctx context.Context, parent *os.File) (int, error) {
	// The wait ends when ctx does (and only then, so that ctx.Err says
	// why): its end moves the read deadline into the past.
	_ = parent.SetReadDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { _ = parent.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := parent.SyscallConn()
	if err != nil {
		return -1, err
	}
	var (
		n, oobn int
		oob     = make([]byte, unix.CmsgSpace(4))
		buf     [1]byte
		rerr    error
	)
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf[:], oob, unix.MSG_CMSG_CLOEXEC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return -1, err
	}
	if n == 0 && oobn == 0 {
		return -1, ErrNotSent
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("bad control message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return -1, fmt.Errorf("want one descriptor (%v)", err)
	}
	return fds[0], nil
}
