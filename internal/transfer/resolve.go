package transfer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/pkg/sftp"
)

// maxLinks bounds the symlinks one resolution follows, as the kernel's
// ELOOP does (40).
const maxLinks = 40

// resolve turns a caller's path into the real path it names on the
// session's side, relative paths from the workspace, and refuses one that
// leads out of it: through "..", an absolute path elsewhere, or a
// symlink. exists says whether the file itself exists (its parents may
// not, for an upload).
func (f *files) resolve(ctx context.Context, op, p string) (string, bool, error) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", false, &PathError{Op: op, Path: p, Err: ErrBadPath, Rule: "give a file's path, relative to the workspace"}
	}
	full := p
	if !path.IsAbs(p) {
		full = f.root + "/" + p
	}
	real, exists, link, err := f.walk(ctx, full)
	if err != nil {
		return "", false, &PathError{Op: op, Path: p, Err: err}
	}
	if !within(f.root, real) {
		rule := fmt.Sprintf("it resolves to %s, outside the workspace %s", real, f.root)
		if link != "" {
			rule = fmt.Sprintf("the symlink %s leads to %s, outside the workspace %s", link, real, f.root)
		}
		return "", false, &PathError{Op: op, Path: p, Err: ErrEscapes, Rule: rule}
	}
	if real == f.root {
		return "", false, &PathError{Op: op, Path: p, Err: ErrIsDir, Rule: "it is the workspace itself"}
	}
	return real, exists, nil
}

// within reports whether p is root or lies under it (both clean).
func within(root, p string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

// walk is realpath(3) over SFTP: it follows p (absolute) one component
// at a time from "/", ".." going to the real parent and each symlink
// read and walked in turn, so the result is what the session's side
// would open, not a lexical guess. From the first component that does
// not exist on, the rest is joined as written (exists is then false).
// link is the last symlink followed (for the message), if any.
func (f *files) walk(ctx context.Context, p string) (real string, exists bool, link string, err error) {
	todo := strings.Split(p, "/")
	cur := "/"
	links := 0
	for len(todo) > 0 {
		if err := ctx.Err(); err != nil {
			return "", false, "", err
		}
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := f.c.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			rest := path.Join(append([]string{next}, todo...)...)
			if strings.Contains("/"+strings.Join(todo, "/")+"/", "/../") {
				// ".." after a missing directory: the kernel would fail
				// with ENOENT; so does this.
				return "", false, "", fmt.Errorf("%w: %s", ErrNotFound, next)
			}
			return rest, false, link, nil
		}
		if err != nil {
			return "", false, "", remoteErr(err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			if len(todo) > 0 && !fi.IsDir() && hasName(todo) {
				return "", false, "", fmt.Errorf("%w: %s is not a directory", ErrNotFound, next)
			}
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", false, "", fmt.Errorf("%w: more than %d symlinks", ErrBadPath, maxLinks)
		}
		target, err := f.c.ReadLink(next)
		if err != nil {
			return "", false, "", remoteErr(err)
		}
		link = next
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, true, link, nil
}

// hasName reports whether comps hold a component that names a child.
func hasName(comps []string) bool {
	for _, c := range comps {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// remoteErr maps an SFTP status to this package's sentinels, keeping the
// original beside it.
func remoteErr(err error) error {
	if err == nil {
		return nil
	}
	var se *sftp.StatusError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w (%w)", ErrDenied, err)
	case errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxPermissionDenied:
		return fmt.Errorf("%w (%w)", ErrDenied, err)
	case errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxNoSuchFile:
		return fmt.Errorf("%w (%w)", ErrNotFound, err)
	}
	return err
}
