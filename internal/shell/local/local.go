// Package local is the shell backend for local targets: an interactive
// shell on the server itself, in a PTY, confined by the sandbox package
// (Landlock) to its workspace, and kept off the network by a network
// namespace of its own (or the sandbox's fallback filter), unless the
// target opts out.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/shell"
)

// Fixed parts of every shell, and defaults for zero-valued Options.
const (
	defaultPath      = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	defaultGrace     = time.Second
	runDirPattern    = "tandem-run-"
	runDirParent     = "/tmp"
	terminalTypeVar  = "TERM=xterm-256color"
	runDirEnvName    = "TANDEM_RUNDIR"
	userRCEnvName    = "TANDEM_USER_RC"
	shellInterpreter = "/bin/sh"
)

// Options configures the local shells of one target. A *Options is the
// target's shell.Dialer; it is read, never modified, by Dial.
type Options struct {
	// Workspace is the directory the shell starts in and, when sandboxed,
	// the only tree (with the session's run dir) it may write. It must be
	// an absolute path to an existing directory; empty is an error.
	Workspace string

	// Network gives a sandboxed shell the host's network: no namespace,
	// no filter, no Landlock TCP rules. The zero value gives it a network
	// namespace of its own (or the fallback filter, NoNetNamespace).
	// Ignored when NoSandbox is set.
	Network bool

	// NoSandbox runs the shell without Landlock, with tandem's own access
	// rights. Only targets configured with `sandbox: none` may set it. The
	// zero value sandboxes, and Dial fails if the kernel cannot enforce
	// the sandbox.
	NoSandbox bool

	// Self is the absolute path of the executable re-executed as the
	// sandbox launcher: tandem itself (os.Executable()), or a test binary
	// whose TestMain dispatches sandbox.ArgName. Required unless NoSandbox.
	Self string

	// ReadOnly lists what a sandboxed shell may read besides its
	// workspace and run dir. Nil means sandbox.DefaultReadOnly().
	ReadOnly []string

	// Env is the shell's base environment, e.g. a curated subset of
	// tandem's own. Nil means just a standard PATH: tandem's environment
	// (which may hold credentials) is never passed on implicitly.
	Env []string

	// RunDirParent is where Dial creates each session's private run dir
	// (mode 0700; the shell's FIFOs and TMPDIR). Empty means /tmp, not
	// $TMPDIR: library code takes no configuration from the environment.
	// Sandboxed shells may read what DefaultReadOnly covers, /tmp included,
	// so with several sandboxed sessions on one host, point this at a
	// directory outside their read-only set (e.g. under tandem's data
	// directory) so that sessions cannot read each other's run dirs.
	RunDirParent string

	// UserRC is the user's own rc file (their real ~/.bashrc), sourced at
	// start when the shell can read it; a sandboxed shell can where the
	// target's read-only list grants it. A local shell's HOME is private
	// (or the workspace), so without UserRC no rc file of the user's is
	// sourced, and never one that happens to sit in the project.
	UserRC string

	// NoNetNamespace runs a sandboxed shell without network: true in the
	// host's network namespace, under Landlock's TCP rules and the
	// sandbox's fallback seccomp filter, with an allowlist's proxy port
	// on the host's loopback: for hosts that refuse namespaces
	// (sandbox.ProbeNamespace fails), and tests. The zero value gives
	// each such shell a network namespace of its own, with nothing but
	// its own loopback (and its proxy port there).
	NoNetNamespace bool

	// UnixSockets lists pathname unix sockets outside the workspace and
	// run dir that a sandboxed shell may connect to (absolute paths; a
	// directory allows the sockets under it). Any other is refused with
	// EACCES, checked by tandem at each connect.
	UnixSockets []string

	// KillGrace is how long Close waits after SIGHUP before it SIGKILLs
	// what is left of the session. Zero means one second.
	KillGrace time.Duration
}

// Dial starts l.Command with /bin/sh -c in a new PTY of l.Cols x l.Rows
// (80x24 if zero), in a new session whose controlling terminal is that
// PTY, confined by the sandbox unless o.NoSandbox.
//
// The environment is o.Env, then TERM=xterm-256color, HOME, TMPDIR, then
// l.Env, then TANDEM_RUNDIR (later entries win). HOME is the workspace
// when sandboxed, since the real home directory is not readable there; an
// unsandboxed shell keeps a HOME from o.Env. TMPDIR and TANDEM_RUNDIR name
// the session's private run dir, which Close removes.
func (o *Options) Dial(ctx context.Context, l shell.Launch) (shell.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("local dial: %w", err)
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("local dial: %w", err)
	}
	if l.Proxy != nil && (o.NoSandbox || o.Network) {
		return nil, errors.New("local dial: a network allowlist needs the sandbox with network off: without it the shell could connect anywhere")
	}
	if !o.NoSandbox {
		if err := (sandbox.Policy{Network: o.Network}).Supported(); err != nil {
			return nil, fmt.Errorf("local dial: %w", err)
		}
	}
	parent := o.RunDirParent
	if parent == "" {
		parent = runDirParent
	}
	runDir, err := os.MkdirTemp(parent, runDirPattern)
	if err != nil {
		return nil, fmt.Errorf("local dial: create run dir: %w", err)
	}
	for _, sub := range []string{"home", "tmp"} {
		if err := os.Mkdir(filepath.Join(runDir, sub), 0o700); err != nil {
			return nil, errors.Join(fmt.Errorf("local dial: create run dir: %w", err), os.RemoveAll(runDir))
		}
	}
	c, err := o.start(ctx, l, runDir)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("local dial: %w", err), os.RemoveAll(runDir))
	}
	return c, nil
}

// check validates the options that Dial cannot default.
func (o *Options) check() error {
	if o == nil {
		return errors.New("no options")
	}
	if !filepath.IsAbs(o.Workspace) {
		return fmt.Errorf("workspace %q is not an absolute path", o.Workspace)
	}
	fi, err := os.Stat(o.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("workspace %q is not a directory", o.Workspace)
	}
	if !o.NoSandbox && o.Self == "" {
		return errors.New("no sandbox launcher: Options.Self is empty")
	}
	return nil
}

// start spawns the shell in its PTY and returns the live connection. A
// sandboxed shell with l.JudgeExec has every exec judged from the shell's
// own on; an unsandboxed one is not judged (there is no launcher).
func (o *Options) start(ctx context.Context, l shell.Launch, runDir string) (*conn, error) {
	argv := []string{shellInterpreter, "-c", l.Command}
	var cmd *exec.Cmd
	var g *guard
	var n *netSetup
	abort := func() {
		if g != nil {
			g.abort()
		}
		n.abort()
	}
	if o.NoSandbox {
		cmd = exec.Command(argv[0], argv[1:]...)
	} else {
		ro := o.ReadOnly
		if ro == nil {
			ro = sandbox.DefaultReadOnly()
		}
		p := sandbox.Policy{ReadWrite: []string{o.Workspace, runDir}, ReadOnly: ro}
		var extra []*os.File // ExtraFiles[i] is the launcher's descriptor 3+i
		// Every sandboxed shell has its connects checked (pathname unix
		// sockets); its execs are judged with l.JudgeExec only.
		var err error
		if n, err = o.network(&p, l, 4+len(extra)); err != nil {
			abort()
			return nil, err
		}
		rules := execguard.SocketRules{
			UnixRoots: append([]string{o.Workspace, runDir}, o.UnixSockets...),
			AnyTCP:    p.Network,
			TCPPorts:  p.ConnectPorts,
		}
		if g, err = newGuard(l.JudgeExec, rules); err != nil {
			abort()
			return nil, err
		}
		p.ExecFD, p.ExecsUnjudged = 3+len(extra), l.JudgeExec == nil
		extra = append(extra, g.child)
		if n.child != nil {
			extra = append(extra, n.child)
		}
		if cmd, err = sandbox.Command(o.Self, p, argv); err != nil {
			abort()
			return nil, err
		}
		cmd.ExtraFiles = extra
	}
	cmd.Dir = o.Workspace
	cmd.Env = o.environ(l.Env, runDir)
	cmd.Env = append(cmd.Env, n.env()...)
	trust, err := n.trustEnv(runDir)
	if err != nil {
		abort()
		return nil, err
	}
	cmd.Env = append(cmd.Env, trust...)

	size := &pty.Winsize{Cols: shell.DefaultCols, Rows: shell.DefaultRows}
	if l.Cols > 0 && l.Rows > 0 {
		size = &pty.Winsize{Cols: uint16(min(l.Cols, 0xffff)), Rows: uint16(min(l.Rows, 0xffff))}
	}
	master, err := pty.StartWithSize(cmd, size)
	if err != nil {
		abort()
		if n.namespaced() && refusedNamespace(err) {
			err = fmt.Errorf("%w (the shell gets a network namespace of its own, and this host refused one: %w)", err, sandbox.ErrNoNamespace)
		}
		return nil, fmt.Errorf("start shell: %w", err)
	}
	ptmx, err := pollable(master)
	if err != nil {
		abort()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start shell: %w", err)
	}
	grace := o.KillGrace
	if grace <= 0 {
		grace = defaultGrace
	}
	c := &conn{
		ptmx:   ptmx,
		cmd:    cmd,
		pid:    cmd.Process.Pid,
		runDir: runDir,
		grace:  grace,
		done:   make(chan struct{}),
		guard:  g,
		files:  o.newFileServer(runDir, n.namespaced()),
	}
	if err := n.started(ctx); err != nil {
		if g != nil {
			g.abort()
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = ptmx.Close()
		return nil, fmt.Errorf("start shell: %w", err)
	}
	if g != nil {
		if err := g.started(ctx, c); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			_ = ptmx.Close()
			return nil, fmt.Errorf("start shell: %w", err)
		}
	}
	go c.wait()
	return c, nil
}

// environ builds the shell's environment; see Dial.
func (o *Options) environ(launch []string, runDir string) []string {
	env := o.Env
	if env == nil {
		env = []string{defaultPath}
	}
	env = append([]string(nil), env...)
	env = append(env, terminalTypeVar)
	if o.NoSandbox {
		if !hasVar(env, "HOME") {
			env = append(env, "HOME="+o.Workspace)
		}
		env = append(env, "TMPDIR="+filepath.Join(runDir, "tmp"))
	} else {
		env = append(o.sandboxEnv(readablePath(env, o.grants(runDir))), sessionHome(runDir)...)
	}
	env = append(env, userRCEnvName+"="+o.userRC(runDir))
	env = append(env, launch...)
	return append(env, runDirEnvName+"="+runDir)
}

// userRC is the rc file the shell is told to source: UserRC, unless the
// sandbox cannot read it (root's /root, a home the target's readOnly list
// does not grant), where bash would start with "Permission denied": the
// shell's own test -r checks permissions, not Landlock's rules.
func (o *Options) userRC(runDir string) string {
	if o.NoSandbox || o.UserRC == "" {
		return o.UserRC
	}
	for _, g := range o.grants(runDir) {
		if sandbox.Covers(g, o.UserRC) {
			return o.UserRC
		}
	}
	return ""
}

// proxyEnv points every tool that honours the usual proxy variables at
// the session's port on tandem's egress proxy, with the session's
// credential, and empties NO_PROXY: a tool that ignores them fails to
// connect (the sandbox allows that port only) rather than reaching out
// on its own.
func proxyEnv(port uint16, token string) []string {
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	if token != "" {
		url = fmt.Sprintf("http://tandem:%s@127.0.0.1:%d", token, port)
	}
	var env []string
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, name+"="+url, strings.ToLower(name)+"="+url)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// grants lists what a sandboxed shell of this target may read.
func (o *Options) grants(runDir string) []string {
	ro := o.ReadOnly
	if ro == nil {
		ro = sandbox.DefaultReadOnly()
	}
	return append([]string{o.Workspace, runDir}, ro...)
}

// sandboxEnv is env for a sandboxed shell: agent commands must never wait
// for an editor or a pager nobody sees, so both are no-ops (git commit
// without -m then stops with "empty commit message" instead of hanging).
func (o *Options) sandboxEnv(env []string) []string {
	return append(env, "GIT_EDITOR=true", "EDITOR=true", "VISUAL=true", "PAGER=cat", "GIT_PAGER=cat", "SYSTEMD_PAGER=cat")
}

// sessionHome points HOME, history, XDG directories and tool caches at the
// session's private home under its run dir, so a session adds no dotfiles
// to the project and no project .bashrc is sourced as the user's.
func sessionHome(runDir string) []string {
	home := filepath.Join(runDir, "home")
	return []string{
		"HOME=" + home, "TMPDIR=" + filepath.Join(runDir, "tmp"), "HISTFILE=" + filepath.Join(home, ".bash_history"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"GOCACHE=" + filepath.Join(home, ".cache", "go-build"), "GOPATH=" + filepath.Join(home, "go"),
		"npm_config_cache=" + filepath.Join(home, ".npm"), "PIP_CACHE_DIR=" + filepath.Join(home, ".cache", "pip"),
	}
}

// readablePath drops the PATH entries the sandbox cannot read: a command
// found there would only fail with "permission denied".
func readablePath(env, grants []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			var keep []string
			for _, dir := range filepath.SplitList(v) {
				for _, g := range grants {
					if dir != "" && filepath.IsAbs(dir) && sandbox.Covers(g, dir) {
						keep = append(keep, dir)
						break
					}
				}
			}
			kv = "PATH=" + strings.Join(keep, string(filepath.ListSeparator))
		}
		out = append(out, kv)
	}
	return out
}

// hasVar reports whether env sets name.
func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return true
		}
	}
	return false
}

// pollable replaces the PTY master returned by creack/pty, which is in
// blocking mode (it calls Fd), with a non-blocking duplicate that Go's
// poller manages, so that Close interrupts a Read blocked on it.
func pollable(master *os.File) (*os.File, error) {
	defer master.Close()
	rc, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("pty master: dup: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("pty master: set non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), master.Name()), nil
}
