package execguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Pair returns the two ends of the socket that carries a listener from the
// launcher to tandem. tandem keeps parent and passes child to the launcher
// (e.g. as an exec.Cmd ExtraFile), closing its own copy of child once the
// launcher has started. Both are close-on-exec, so the shell inherits
// neither.
func Pair() (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("exec guard: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "execguard-parent"), os.NewFile(uintptr(fds[1]), "execguard-child"), nil
}

// Send passes the listener over the socket sock (the launcher's end of a
// Pair) with SCM_RIGHTS. The caller closes both afterwards: once tandem
// holds the listener, the launcher needs neither. The send never waits for
// tandem: the launcher's own exec is then held in the kernel until tandem
// serves it, and fails with ENOSYS if tandem closes the socket unread.
func Send(sock, listener int) error {
	rights := unix.UnixRights(listener)
	if err := unix.Sendmsg(sock, []byte{'L'}, rights, nil, 0); err != nil {
		return fmt.Errorf("exec guard: send listener: %w", err)
	}
	return nil
}

// Receive reads the listener that the launcher sends on parent, waiting
// until ctx ends. A launcher that exits without sending (it refused to run
// the program) makes Receive fail with an error, not wait.
func Receive(ctx context.Context, parent *os.File) (*Listener, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = parent.SetReadDeadline(dl)
	} else {
		_ = parent.SetReadDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = parent.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := parent.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("exec guard: receive listener: %w", err)
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
		return nil, fmt.Errorf("exec guard: receive listener: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, errors.New("exec guard: receive listener: the launcher exited without sending it")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("exec guard: receive listener: bad control message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, fmt.Errorf("exec guard: receive listener: want one descriptor (%v)", err)
	}
	return newListener(fds[0])
}
