package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/pkg/sftp"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// filesArg, as the launcher's first argument, makes it serve SFTP on its
// stdin and stdout instead of exec'ing a program: "tandem __sandbox
// --serve-files <policy> <dir>". It is how a local session's file
// transfers run under the session's own Landlock rules.
const filesArg = "--serve-files"

// FilesCommand returns the command that serves SFTP on its stdin and
// stdout, with relative paths from dir, confined by p: the launcher
// applies p as for a shell, drops every capability of every thread, and
// then serves in its own process (nothing is exec'd). The policy may not
// hand the launcher descriptors (ExecFD, ProxyFD) or ask for the seccomp
// fallback: the server opens no socket, and Landlock's TCP rules (with
// Network false) or a namespace (Namespace) keep it off the network.
// The caller sets Stdin and Stdout (pipes) and Stderr.
func FilesCommand(self string, p Policy, dir string) (*exec.Cmd, error) {
	if !filepath.IsAbs(self) || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("sandbox files command: launcher %q and directory %q must be absolute", self, dir)
	}
	if err := p.validateFiles(); err != nil {
		return nil, fmt.Errorf("sandbox files command: %w", err)
	}
	enc, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("sandbox files command: encode policy: %w", err)
	}
	cmd := exec.Command(self, ArgName, filesArg, string(enc), dir)
	cmd.Dir = dir
	if p.Namespace {
		cmd.SysProcAttr = namespaceAttr()
	}
	return cmd, nil
}

// validateFiles is validate plus what a file server's policy may not ask.
func (p Policy) validateFiles() error {
	if p.ExecFD != 0 || p.ProxyFD != 0 || p.ProxyPort != 0 || p.NetFilter {
		return errors.New("a file server takes no descriptors and no seccomp filter")
	}
	return p.validate()
}

// serveFiles is Main for filesArg: args are the policy and the directory.
func serveFiles(args []string) int {
	if len(args) != 2 {
		return fail(exitRefused, errors.New("usage: "+ArgName+" "+filesArg+" <policy> <dir>"))
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader([]byte(args[0])))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fail(exitRefused, fmt.Errorf("decode policy: %w", err))
	}
	if err := p.validateFiles(); err != nil {
		return fail(exitRefused, err)
	}
	dir := args[1]
	runtime.LockOSThread()
	abi := kernelABI()
	if err := requirement(abi, p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to serve files: %w", err))
	}
	if err := isolateNetwork(p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to serve files: %w", err))
	}
	if err := restrict(abi, p); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to serve files: apply landlock: %w", err))
	}
	// The server runs here, on every thread of this process: each must
	// lose root's powers, not only this one (there is no exec to clear
	// them).
	if err := dropAllThreadsCapabilities(); err != nil {
		return fail(exitRefused, fmt.Errorf("refusing to serve files: drop capabilities: %w", err))
	}
	// Nothing but the standard streams is inherited (tandem's descriptors
	// are close-on-exec, and the command passes no ExtraFiles).
	s, err := sftp.NewServer(stdio{os.Stdin, os.Stdout}, sftp.WithServerWorkingDirectory(dir), sftp.WithMaxTxPacket(1<<18))
	if err != nil {
		return fail(exitRefused, fmt.Errorf("sftp server: %w", err))
	}
	if err := s.Serve(); err != nil && !errors.Is(err, io.EOF) {
		return fail(1, fmt.Errorf("sftp server: %w", err))
	}
	return 0
}

// stdio is the server's stream: requests on stdin, replies on stdout.
type stdio struct {
	io.Reader
	w *os.File
}

func (s stdio) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s stdio) Close() error                { return s.w.Close() }

// dropAllThreadsCapabilities is dropCapabilities on every thread of the
// process at once (psx, as go-landlock applies its rules).
func dropAllThreadsCapabilities() error {
	for c := 0; c < 64; c++ {
		_, _, e := psx.Syscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0)
		if e == unix.EINVAL || e == unix.EPERM {
			break
		}
		if e != 0 {
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, e)
		}
	}
	if _, _, e := psx.Syscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); e != 0 && e != unix.EINVAL {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if _, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&none[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&none)
	return nil
}
