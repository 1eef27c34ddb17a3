package execguard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// maxLinks is how many symbolic links one lookup follows (the kernel's
// MAXSYMLINKS) before it fails with ELOOP.
const maxLinks = 40

// view resolves paths as one stopped process sees them, never as tandem
// does: relative paths against its working directory, symbolic links
// inside its root (/proc/<pid>/root), and the names that mean "this
// process" (/proc/self, /proc/thread-self, and /dev/fd, /dev/stdin, …
// through them) as that process. tandem's own descriptors, working
// directory and root play no part.
type view struct {
	pid int
	cwd string
}

// viewOf is the view of the process that made exec e.
func viewOf(e Exec) view { return view{pid: e.Pid, cwd: e.Cwd} }

func (v view) proc() string { return "/proc/" + strconv.Itoa(v.pid) }

// resolve follows path to the file it names for the process. name is
// that file's path as the process sees it (symlinks resolved); open is a
// path through which tandem opens the same file. A descriptor that names
// no path (a pipe, a memfd, a deleted file) ends the walk: name is then
// what /proc shows for it ("/memfd:x (deleted)"), and open the descriptor
// itself.
func (v view) resolve(path string) (name, open string, err error) {
	if path == "" {
		return "", "", unix.ENOENT
	}
	if !strings.HasPrefix(path, "/") {
		path = v.cwd + "/" + path
	}
	root := v.proc() + "/root"
	done, todo, links := "", path, 0
	for todo != "" {
		var comp string
		todo = strings.TrimLeft(todo, "/")
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			if i := strings.LastIndexByte(done, '/'); i >= 0 {
				done = done[:i]
			}
			continue
		}
		next := done + "/" + comp
		switch next {
		case "/proc/self", "/proc/thread-self":
			// Resolved by the kernel, these would name tandem.
			next = v.proc()
		}
		fi, err := os.Lstat(root + next)
		if err != nil {
			return "", "", unwrapErrno(err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if todo != "" && !fi.IsDir() && strings.Trim(todo, "/") != "" {
				return "", "", unix.ENOTDIR
			}
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", "", unix.ELOOP
		}
		target, err := os.Readlink(root + next)
		if err != nil {
			return "", "", unwrapErrno(err)
		}
		// A descriptor, cwd, root or exe link of /proc names a file that
		// may have no path: a pipe, a socket, a memfd, a deleted file.
		if magic := strings.HasPrefix(next, "/proc/") && done != "/proc"; magic &&
			(!strings.HasPrefix(target, "/") || strings.HasSuffix(target, " (deleted)")) {
			if strings.Trim(todo, "/") != "" {
				return "", "", unix.ENOTDIR
			}
			return target, root + next, nil
		}
		if strings.HasPrefix(target, "/") {
			done = ""
		}
		todo = target + "/" + todo
	}
	if done == "" {
		done = "/"
	}
	return done, root + done, nil
}

// unwrapErrno returns the errno inside err, or err.
func unwrapErrno(err error) error {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// readShebang reads the #! line of the regular file at open, as the kernel
// would before running it. A file that is not a script (an ELF program, a
// directory, a device) has none.
func readShebang(open string) (interp, arg string, hasArg, ok bool, err error) {
	f, err := os.OpenFile(open, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EISDIR) {
			return "", "", false, false, nil // a socket, a directory: the kernel runs neither
		}
		return "", "", false, false, fmt.Errorf("read its first line: %w", unwrapErrno(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", "", false, false, fmt.Errorf("read its first line: %w", err)
	} else if !fi.Mode().IsRegular() {
		return "", "", false, false, nil // the kernel runs only regular files
	}
	buf := make([]byte, shebangBuf)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", "", false, false, fmt.Errorf("read its first line: %w", err)
	}
	interp, arg, hasArg, ok = ParseShebang(buf[:n])
	return interp, arg, hasArg, ok, nil
}

// Look says what the file at path is as the stopped process that made e
// sees it: resolved is its path with every symbolic link followed in the
// process's own view (its working directory and root; /dev/fd/N,
// /proc/self/… and /proc/<pid>/… are its own descriptors and its own
// entries, never tandem's), and shebang, when the file is a #! script, is
// its interpreter and the interpreter's one optional argument, as the
// kernel would read them. A relative path is taken against the process's
// working directory, as the kernel takes a #! interpreter's. The process
// must still be waiting on its exec (it is while a Judge runs).
//
// A file tandem cannot read is an error: whether it is a script, and so
// what it runs, is then unknown.
func (e Exec) Look(path string) (resolved string, shebang []string, err error) {
	if path == e.Path && e.at != "" {
		path = e.at
	}
	name, open, err := viewOf(e).resolve(path)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	interp, arg, hasArg, ok, err := readShebang(open)
	if err != nil {
		return name, nil, fmt.Errorf("%s: %w", path, err)
	}
	if !ok {
		return name, nil, nil
	}
	if hasArg {
		return name, []string{interp, arg}, nil
	}
	return name, []string{interp}, nil
}
