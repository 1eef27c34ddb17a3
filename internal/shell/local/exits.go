package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/shell"
)

// How programs end: a sandboxed program is not tandem's child, so tandem
// cannot wait for it. The kernel's process events connector (netlink,
// NETLINK_CONNECTOR, CN_IDX_PROC) reports every process's exec and exit,
// with its exit status, to a subscriber with CAP_NET_ADMIN in the initial
// network namespace. Without it (tandem not root, a container, a kernel
// without CONFIG_PROC_EVENTS) no event comes, and exit statuses are
// absent, never made up.

// The connector's constants (linux/connector.h, linux/cn_proc.h).
const (
	cnIdxProc       = 1
	cnValProc       = 1
	procCnListen    = 1
	procCnIgnore    = 2
	procEventFork   = 0x00000001
	procEventExec   = 0x00000002
	procEventExit   = 0x80000000
	nlmsgHdrLen     = 16
	cnMsgLen        = 20
	procEventHdrLen = 16 // what, cpu, timestamp_ns
	exitRcvBuf      = 4 << 20
)

// maxWatched bounds the processes one shell's watch follows; past it, a
// program's status is not followed (it stays absent).
const maxWatched = 4096

// exitWatch follows the processes whose exec a shell's judge allowed, by
// process id, until they exit. Entries end with their process; a process
// that outlives the session is dropped with the watch.
type exitWatch struct {
	f  *os.File
	rc syscall.RawConn

	mu    sync.Mutex // guards procs and reads of the socket
	procs map[int]*watched
	buf   []byte
	done  chan struct{}
}

// watched is one process: the program whose exec was allowed and has not
// happened yet (pending), and the one that runs (running).
type watched struct {
	pending, running func(shell.ExitStatus)
}

// newExitWatch subscribes to process events. An error means no exit
// status will be known; a subscription the kernel refuses (no
// CAP_NET_ADMIN) only means no events come.
func newExitWatch() (*exitWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("exit watch: socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("exit watch: bind: %w", err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, exitRcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, exitRcvBuf)
	}
	if err := control(fd, procCnListen); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("exit watch: listen: %w", err)
	}
	w := &exitWatch{f: os.NewFile(uintptr(fd), "proc-connector"), procs: map[int]*watched{}, buf: make([]byte, 64<<10), done: make(chan struct{})}
	if w.rc, err = w.f.SyscallConn(); err != nil {
		_ = w.f.Close()
		return nil, fmt.Errorf("exit watch: %w", err)
	}
	go w.run()
	return w, nil
}

// control sends the connector one multicast operation.
func control(fd int, op uint32) error {
	b := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.NLMSG_DONE)
	ne.PutUint32(b[16:], cnIdxProc)
	ne.PutUint32(b[20:], cnValProc)
	ne.PutUint16(b[32:], 4)
	ne.PutUint32(b[36:], op)
	return unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// run reads events until close.
func (w *exitWatch) run() {
	defer close(w.done)
	for {
		err := w.rc.Read(func(fd uintptr) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.drain(int(fd)) > 0
		})
		if err != nil {
			return
		}
	}
}

// sync handles every event the kernel has queued so far.
func (w *exitWatch) sync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.Control(func(fd uintptr) { w.drain(int(fd)) })
}

// expect notes that process tgid is about to become a program whose end
// exited is told; events queued before are handled first, so that an
// older exec of the process does not count as this one.
func (w *exitWatch) expect(tgid int, exited func(shell.ExitStatus)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.rc.Control(func(fd uintptr) { w.drain(int(fd)) })
	p := w.procs[tgid]
	if p == nil {
		if len(w.procs) >= maxWatched {
			return
		}
		p = &watched{}
		w.procs[tgid] = p
	}
	p.pending = exited
}

// close unsubscribes and stops the reader; the watched are forgotten.
func (w *exitWatch) close() {
	_ = w.rc.Control(func(fd uintptr) { _ = control(int(fd), procCnIgnore) })
	_ = w.f.Close()
	<-w.done
	w.mu.Lock()
	w.procs = nil
	w.mu.Unlock()
}

// drain reads the socket until it is empty and returns how many messages
// it read; w.mu is held. Events lost to a full buffer (ENOBUFS) make
// every followed process's status unknown.
func (w *exitWatch) drain(fd int) int {
	n := 0
	for {
		m, _, err := unix.Recvfrom(fd, w.buf, 0)
		switch {
		case errors.Is(err, unix.ENOBUFS):
			clear(w.procs)
			n++
			continue
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || m <= 0:
			return n
		}
		n++
		w.messages(w.buf[:m])
	}
}

// messages handles the netlink messages of one datagram; w.mu is held.
func (w *exitWatch) messages(b []byte) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHdrLen {
		l := int(ne.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			return
		}
		msg := b[nlmsgHdrLen:l]
		b = b[(l+3)&^3:]
		if len(msg) < cnMsgLen+procEventHdrLen || ne.Uint32(msg) != cnIdxProc || ne.Uint32(msg[4:]) != cnValProc {
			continue
		}
		ev := msg[cnMsgLen:]
		w.event(ne.Uint32(ev), ev[procEventHdrLen:])
	}
}

// event handles one process event; w.mu is held.
func (w *exitWatch) event(what uint32, d []byte) {
	ne := binary.NativeEndian
	switch what {
	case procEventFork:
		if len(d) >= 16 && ne.Uint32(d[8:]) == ne.Uint32(d[12:]) {
			// A new process with this pid: whatever was followed under
			// it has ended unseen.
			delete(w.procs, int(ne.Uint32(d[12:])))
		}
	case procEventExec:
		if len(d) >= 8 {
			if p := w.procs[int(ne.Uint32(d[4:]))]; p != nil && p.pending != nil {
				p.running, p.pending = p.pending, nil
			}
		}
	case procEventExit:
		if len(d) < 16 || ne.Uint32(d) != ne.Uint32(d[4:]) {
			return // a thread, not the process
		}
		tgid := int(ne.Uint32(d[4:]))
		p := w.procs[tgid]
		if p == nil || p.pending != nil {
			// An exec in flight: a thread other than the main one execs,
			// and the main one ends first. The status stays unknown.
			return
		}
		delete(w.procs, tgid)
		if p.running != nil {
			p.running(exitStatus(ne.Uint32(d[8:])))
		}
	}
}

// exitStatus decodes a wait status.
func exitStatus(code uint32) shell.ExitStatus {
	ws := syscall.WaitStatus(code)
	if ws.Signaled() {
		return shell.ExitStatus{Code: 128 + int(ws.Signal()), Signal: unix.SignalName(ws.Signal())}
	}
	return shell.ExitStatus{Code: ws.ExitStatus()}
}
