// Package execguard judges every program a sandboxed process tree starts,
// as it starts, with seccomp user notification.
//
// The sandbox launcher calls Install on the thread that will exec the
// shell: it installs a seccomp filter that turns execve and execveat into
// notifications and hands the filter's listener descriptor to tandem over a
// socket (Send). tandem receives it (Receive) and serves it (Serve): for
// each exec it reads the path, argv and cwd of the stopped process, asks a
// Judge, and lets the exec continue or fails it with EPERM. A Judge that
// takes its time (a human approving) simply holds the process in the
// kernel.
//
//	launcher (tandem __sandbox)          tandem
//	  landlock, caps dropped
//	  Install ──listener fd──Send──────▶ Receive ─▶ Serve ─▶ Judge
//	  execve(shell) ◀── held ──────────────────────── continue / EPERM
//
// The same filter keeps a session's sockets (sockets.go), and the launcher
// installs it for every sandboxed session, exec judging or not (Filter):
// connect, sendmsg, sendmmsg and a sendto that names an address wait on
// tandem too. tandem makes each connect itself, on a duplicate of the
// process's socket (pidfd_getfd), so that what it checked is what
// connects: a pathname unix socket only under the allowed roots
// (SocketRules: the workspace, the session's run dir, the target's
// unixSockets), resolved in the process's view; an Internet stream socket
// only to the allowed ports, as Landlock's rule says. io_uring is refused
// (a ring connects without connect(2)). Under the network fallback, which
// cannot tell a unix socket's listen from a TCP one's, listen waits on
// tandem as well (unix sockets only). A process chain can have one filter
// with a listener, so one filter does both.
//
// The package fails closed. Once the listener is gone (tandem closed it,
// or never received it, or died) the kernel fails every pending and later
// exec of the tree with ENOSYS; a process whose arguments cannot be read
// is denied; execs of a foreign architecture's ABI (i386, x32) are denied
// by the filter itself.
//
// A Judge learns what the exec runs with Exec.Look (view.go): paths are
// resolved as the stopped process sees them, against its cwd, inside its
// root (/proc/<pid>/root), with /proc/self, /proc/thread-self and so
// /dev/fd/N naming that process, never tandem (whose descriptor 9 is some
// file of its own); a /proc descriptor link that names no path (a pipe, a
// memfd, a deleted file) is opened through the descriptor itself. Look
// also reads a script's #! line as the kernel's binfmt_script does
// (ParseShebang, shebang.go), since the kernel starts the interpreter
// without a second execve. The check that a path exists (a shell
// searching PATH) is made in the same view.
//
// Who started a process (Trace, ancestry.go) is read from its parents and
// their start times. GuardLineage (lineagefilter.go), installed beside the
// exec filter, keeps those facts the kernel's: no process of the tree may
// fork as its parent's sibling (clone with CLONE_PARENT; clone3, whose
// flags a filter cannot read, gets ENOSYS), attach to another (ptrace
// ATTACH, SEIZE) or write another's memory (process_vm_writev).
//
// What it does not stop: a multithreaded program can rewrite the argv it
// passed between tandem's read and the kernel's own (the check and the
// use are not atomic: seccomp user notification is no security boundary
// on its own). The same holds for the file: a script's #! line, or a
// symlink on the path, can be changed after Look read it and before the
// kernel opens it, by another process of the session. Nor does it stop a
// copy of a program under another name (it is another program),
// binfmt_misc interpreters registered on the host (qemu-user, Java: the
// kernel starts them without an exec), a program that loads and runs
// another itself, and a program that does harm without an exec at all
// (unlink files itself, write them, talk to a socket). Paths are resolved
// with tandem's /proc numbering: a sandbox with a pid namespace of its own
// would need its pids mapped. Landlock stays the boundary; exec judging
// keeps an agent's command rules true below the command line.
//
// The package knows processes and syscalls, not policies, sessions or MCP.
package execguard
