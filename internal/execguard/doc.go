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
// The package fails closed. Once the listener is gone (tandem closed it,
// or never received it, or died) the kernel fails every pending and later
// exec of the tree with ENOSYS; a process whose arguments cannot be read
// is denied; execs of a foreign architecture's ABI (i386, x32) are denied
// by the filter itself.
//
// What it does not stop: a multithreaded program can rewrite the argv it
// passed between tandem's read and the kernel's own (the check and the
// use are not atomic: seccomp user notification is no security boundary
// on its own), and a program can do harm without an exec at all (unlink
// files itself, write them, talk to a socket). Landlock stays the boundary;
// exec judging keeps an agent's command rules true below the command line.
//
// The package knows processes and syscalls, not policies, sessions or MCP.
package execguard
