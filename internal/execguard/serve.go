package execguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Exec is one program a process is about to start, as tandem read it from
// the stopped process.
type Exec struct {
	// Pid is the process that called execve (in tandem's pid namespace).
	Pid int
	// Path is the file to execute as the process named it, made absolute
	// against Cwd (or execveat's directory); symlinks are not resolved
	// (Look resolves them as the process sees them).
	Path string
	// Argv is the argument vector, argv[0] included, as the program will
	// receive it: at most MaxArgs words and MaxArgBytes bytes.
	Argv []string
	// Truncated says Argv holds only the first words: the program gets more.
	Truncated bool
	// Cwd is the process's working directory.
	Cwd string
	// at is how the process named the file when Path is not a path it
	// could look up itself: execveat's /dev/fd/N, with its path after it.
	at string
}

// Verdict is a Judge's answer.
type Verdict int

// The verdicts. The zero value denies.
const (
	// Deny fails the exec with EPERM ("Operation not permitted").
	Deny Verdict = iota
	// Allow lets the exec continue.
	Allow
)

// Judge decides one exec. It may take as long as it needs (the process
// waits in the kernel); it should return Deny promptly once ctx ends.
// Serve calls it from many goroutines at once.
type Judge func(ctx context.Context, e Exec) Verdict

// Bounds on what is read of an exec's argv. Past either, Exec.Truncated
// is set and the rest is not read.
const (
	MaxArgs     = 4096
	MaxArgBytes = 256 << 10
	maxPath     = unix.PathMax
)

// The kernel's uapi structures (linux/seccomp.h).
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// ioctlNotifIDValid is SECCOMP_IOCTL_NOTIF_ID_VALID, _IOW('!', 2, __u64);
// golang.org/x/sys/unix does not define it.
const ioctlNotifIDValid = 0x40082102

// atFDCWD is AT_FDCWD as execveat's dirfd argument carries it.
const atFDCWD = -100

// Listener is the tandem end of one exec filter: every exec of the
// filtered process tree waits on it until Serve answers.
type Listener struct {
	f     *os.File
	rules SocketRules // set by AllowSockets before Serve
}

// newListener wraps a received descriptor after checking that it is a
// seccomp listener, so the poller can wait on it.
func newListener(fd int) (*Listener, error) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || !strings.Contains(link, "seccomp") {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("exec guard: the received descriptor is not a seccomp listener (%q, %v)", link, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("exec guard: listener: %w", err)
	}
	return &Listener{f: os.NewFile(uintptr(fd), "seccomp-listener")}, nil
}

// Close closes the listener. Every exec that waits on it, and every later
// one of its process tree, then fails with ENOSYS.
func (l *Listener) Close() error { return l.f.Close() }

// errOrphaned ends Serve: no process uses the filter any more.
var errOrphaned = errors.New("no process left")

// Serve answers the listener's execs with judge, and its processes'
// connects and sends by the rules AllowSockets set (sockets.go), until ctx
// ends or every process of the tree has exited, then closes the listener
// (calls still waiting fail with ENOSYS). A nil judge denies every exec (a
// filter installed without exec judging sends none). Each call is answered
// in its own goroutine, so one that waits for a human holds up no other.
// Serve returns nil when the tree has exited, ctx.Err() when ctx ended.
func (l *Listener) Serve(ctx context.Context, judge Judge) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		_ = l.f.Close()
		wg.Wait()
	}()
	stop := context.AfterFunc(ctx, func() { _ = l.f.Close() })
	defer stop()
	rc, err := l.f.SyscallConn()
	if err != nil {
		return fmt.Errorf("exec guard: serve: %w", err)
	}
	for {
		var n notif
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			n, rerr = receive(int(fd))
			return !errors.Is(rerr, unix.EAGAIN)
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("exec guard: serve: %w", err)
		case errors.Is(rerr, errOrphaned):
			return nil
		case errors.Is(rerr, unix.ENOENT), errors.Is(rerr, unix.EINTR):
			continue // the process died before we took its notification
		case rerr != nil:
			return fmt.Errorf("exec guard: receive: %w", rerr)
		}
		if isSocketCall(n) {
			// Not waited for: a connect made on the process's behalf can
			// block (a full backlog, a silent host) for as long as the
			// process's own would, and must not hold up the end of
			// serving. The process is killable meanwhile; the answer,
			// once the listener is closed, goes nowhere.
			go func() {
				resp := l.socketCall(rc, n)
				_ = send(rc, &resp)
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if judge == nil {
				// The filter notifies execs only when they are judged.
				resp := notifResp{ID: n.ID, Error: -int32(unix.EPERM)}
				_ = send(rc, &resp)
				return
			}
			l.answer(ctx, rc, n, judge)
		}()
	}
}

// receive takes one notification if one is pending; EAGAIN means none is,
// errOrphaned that none will come.
func receive(fd int) (notif, error) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	k, err := unix.Poll(pfd, 0)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return notif{}, unix.EAGAIN
		}
		return notif{}, err
	}
	if k == 0 {
		return notif{}, unix.EAGAIN
	}
	if pfd[0].Revents&unix.POLLIN == 0 {
		if pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
			return notif{}, errOrphaned
		}
		return notif{}, unix.EAGAIN
	}
	var n notif // the kernel wants it zeroed
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
		return notif{}, errno
	}
	return n, nil
}

// answer reads, judges and answers one exec. Anything it cannot read is
// denied without asking the judge.
func (l *Listener) answer(ctx context.Context, rc rawConn, n notif, judge Judge) {
	e, err := read(n)
	if err == nil {
		// The pid we read must still be the one waiting on this
		// notification, or we read someone else's memory.
		err = control(rc, func(fd int) error { return idValid(fd, n.ID) })
	}
	v, errno := Deny, unix.EPERM
	if err == nil {
		if missing := absent(e); missing != 0 {
			// A shell searching PATH tries directories where the program is
			// not: the kernel would fail those with ENOENT, so they are
			// failed so without asking. A file created since fails closed.
			errno = missing
		} else {
			v = judgeWhileWaiting(ctx, rc, n.ID, judge, e)
		}
	}
	if ctx.Err() != nil {
		v = Deny
	}
	resp := notifResp{ID: n.ID, Error: -int32(errno)}
	if v == Allow {
		resp = notifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	}
	_ = send(rc, &resp)
}

// send answers a notification. ENOENT: the process was killed while it
// waited; nothing to answer.
func send(rc rawConn, resp *notifResp) error {
	return control(rc, func(fd int) error {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(resp)))
		if errno != 0 {
			return errno
		}
		return nil
	})
}

// How often a judge that takes its time is checked on: a process killed
// while it waited ends the judge's context, so that nobody is left asked
// about a program that is gone.
const (
	watchAfter = 250 * time.Millisecond
	watchEvery = 250 * time.Millisecond
)

// judgeWhileWaiting runs judge with a context that ends if the process
// stops waiting for the answer (it was killed).
func judgeWhileWaiting(ctx context.Context, rc rawConn, id uint64, judge Judge, e Exec) Verdict {
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	t := time.AfterFunc(watchAfter, func() {
		tick := time.NewTicker(watchEvery)
		defer tick.Stop()
		for {
			if control(rc, func(fd int) error { return idValid(fd, id) }) != nil {
				cancel()
				return
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	v := judge(jctx, e)
	t.Stop()
	close(done)
	if jctx.Err() != nil {
		return Deny
	}
	return v
}

// absent returns ENOENT or ENOTDIR when the exec's path does not lead to
// a file for the process that made it, as the exec would fail anyway; 0
// otherwise. The path is looked up in that process's view: /dev/fd/9 is
// its descriptor 9, not tandem's.
func absent(e Exec) unix.Errno {
	p := e.Path
	if e.at != "" {
		p = e.at
	}
	_, _, err := viewOf(e).resolve(p)
	var errno unix.Errno
	if errors.As(err, &errno) && (errno == unix.ENOENT || errno == unix.ENOTDIR) {
		return errno
	}
	return 0
}

// rawConn is the part of syscall.RawConn answer uses.
type rawConn interface {
	Control(func(fd uintptr)) error
}

// control runs f on the listener's descriptor, unless it is closed.
func control(rc rawConn, f func(fd int) error) error {
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// idValid reports (as a nil error) that notification id still waits.
func idValid(fd int, id uint64) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), ioctlNotifIDValid, uintptr(unsafe.Pointer(&id))); errno != 0 {
		return fmt.Errorf("notification %d no longer valid: %w", id, errno)
	}
	return nil
}

// read reads the exec's path, argv and cwd out of the stopped process.
func read(n notif) (Exec, error) {
	a, _ := hostArchs()
	pid := int(n.Pid)
	e := Exec{Pid: pid}
	var pathPtr, argvPtr uint64
	dirfd, flags := atFDCWD, uint64(0)
	switch {
	case n.Data.Arch == a.native.arch && uint32(n.Data.Nr) == a.native.execve:
		pathPtr, argvPtr = n.Data.Args[0], n.Data.Args[1]
	case n.Data.Arch == a.native.arch && uint32(n.Data.Nr) == a.native.execveat:
		dirfd, pathPtr, argvPtr, flags = int(int32(n.Data.Args[0])), n.Data.Args[1], n.Data.Args[2], n.Data.Args[4]
	default:
		return e, fmt.Errorf("unexpected syscall %d (arch %#x)", n.Data.Nr, n.Data.Arch)
	}
	cwd, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/cwd")
	if err != nil {
		return e, fmt.Errorf("cwd: %w", err)
	}
	e.Cwd = cwd
	m := mem{pid: pid}
	path, _, err := m.str(pathPtr, maxPath)
	if err != nil {
		return e, fmt.Errorf("path: %w", err)
	}
	if e.Path, e.at, err = resolve(pid, cwd, dirfd, path, flags); err != nil {
		return e, err
	}
	if e.Argv, e.Truncated, err = m.argv(argvPtr); err != nil {
		return e, fmt.Errorf("argv: %w", err)
	}
	return e, nil
}

// resolve makes an exec's path absolute the way the kernel will look it
// up. With execveat's directory descriptor, at is the same path through
// that descriptor (/dev/fd/N/path), which Look follows in the process.
func resolve(pid int, cwd string, dirfd int, path string, flags uint64) (abs, at string, err error) {
	if strings.HasPrefix(path, "/") {
		return cleanAbs(path), "", nil
	}
	base := cwd
	if dirfd != atFDCWD {
		p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(dirfd))
		if err != nil {
			return "", "", fmt.Errorf("execveat dirfd %d: %w", dirfd, err)
		}
		at = "/dev/fd/" + strconv.Itoa(dirfd)
		if path == "" && flags&unix.AT_EMPTY_PATH != 0 {
			return p, at, nil // fexecve: the descriptor is the program
		}
		base, at = p, at+"/"+path
	}
	if path == "" {
		return "", "", errors.New("empty path")
	}
	return cleanAbs(base + "/" + path), at, nil
}
