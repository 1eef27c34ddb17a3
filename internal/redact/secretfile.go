package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// stamp tells one version of a secret file from another without reading
// it: its inode, size and modification time. The zero stamp is a file
// that does not exist.
type stamp struct {
	dev, ino uint64
	size     int64
	mtime    int64
}

func stampOf(fi fs.FileInfo) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return stamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano()}
}

// openSecretFile opens the configured path p: a relative p with o.Root set
// beneath o.Root (Options.Root), one with o.Base set in o.Base; there a
// missing file is (nil, nil): that project has no such secrets. name is
// the path it opened.
func openSecretFile(p string, o Options) (f *os.File, name string, err error) {
	relative := !filepath.IsAbs(p) && !strings.HasPrefix(p, "~")
	if o.Root != "" && relative {
		f, err := openBeneath(o.Root, p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, p, nil
		}
		if err != nil {
			return nil, p, &FileError{Path: p, Err: err}
		}
		return f, p, nil
	}
	name = p
	switch {
	case o.Base != "" && relative:
		name = filepath.Join(o.Base, p)
	case strings.HasPrefix(p, "~/"):
		if o.Home == "" {
			return nil, p, &FileError{Path: p, Err: errNoHome}
		}
		name = filepath.Join(o.Home, p[2:])
	case strings.HasPrefix(p, "~"):
		return nil, p, &FileError{Path: p, Err: errors.New("only ~/ is expanded, not ~user/")}
	}
	f, err = os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) && o.Base != "" && relative {
		return nil, name, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, name, &FileError{Path: p, Err: fmt.Errorf("%w; create it, or remove it from secretFiles", err)}
	}
	if err != nil {
		return nil, name, &FileError{Path: shownPath(p, name, o), Err: err}
	}
	return f, name, nil
}

// shownPath is how an error names the configured path p, opened as name:
// as configured, but a relative path read in Options.Base in full, since
// the operator's log must say where tandem looked.
func shownPath(p, name string, o Options) string {
	if o.Root == "" && o.Base != "" && !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
		return name
	}
	return p
}

// readSecretFile reads the configured path p (see openSecretFile) and
// returns its values and the stamp of what it read.
func readSecretFile(p string, o Options) ([]string, stamp, error) {
	f, name, err := openSecretFile(p, o)
	if f == nil {
		return nil, stamp{}, err
	}
	data, st, err := readOpened(f)
	if err != nil {
		return nil, stamp{}, &FileError{Path: shownPath(p, name, o), Err: err}
	}
	vals, err := parseSecretFile(name, data)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			fe.Path = shownPath(p, name, o)
		}
		return nil, stamp{}, err
	}
	return vals, st, nil
}

// statSecretFile is the stamp of the configured path p as readSecretFile
// would open it now.
func statSecretFile(p string, o Options) (stamp, error) {
	f, _, err := openSecretFile(p, o)
	if f == nil {
		return stamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return stamp{}, &FileError{Path: p, Err: err}
	}
	return stampOf(fi), nil
}

// MaxSecretFileBytes bounds a secret file: a file of secrets is small, and
// a larger one is more likely a mistake (or a device) than a key store.
const MaxSecretFileBytes = 1 << 20

// openBeneath opens rel beneath the directory root: a path, symlink or
// ".." that would leave root is refused by the kernel (openat2
// RESOLVE_BENEATH), whatever was put in root meanwhile.
func openBeneath(root, rel string) (*os.File, error) {
	dir, err := os.Open(root)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd, err := unix.Openat2(int(dir.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.EXDEV) {
		return nil, fmt.Errorf("it leads out of %s (a symlink or ..); a secret file must lie within it", root)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// readOpened reads f, a regular file of at most MaxSecretFileBytes, and
// closes it; st is the stamp of what it read.
func readOpened(f *os.File) (data []byte, st stamp, err error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, stamp{}, err
	}
	if !fi.Mode().IsRegular() {
		return nil, stamp{}, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err = io.ReadAll(io.LimitReader(f, MaxSecretFileBytes+1))
	if err != nil {
		return nil, stamp{}, err
	}
	if len(data) > MaxSecretFileBytes {
		return nil, stamp{}, fmt.Errorf("larger than %d bytes: list files that hold secrets only", MaxSecretFileBytes)
	}
	return data, stampOf(fi), nil
}

// parseSecretFile returns the values in data, parsed by the format its name
// and content suggest: JSON for a .json name or for content that is a JSON
// object or array; INI for a .ini or .cfg name or one named credentials or
// config; dotenv for anything else. Values are returned as found; the
// caller drops the short ones.
func parseSecretFile(name string, data []byte) ([]string, error) {
	base := filepath.Base(name)
	ext := strings.ToLower(filepath.Ext(base))
	switch {
	case ext == ".json" || isJSONDoc(data):
		vals, err := parseJSON(data)
		if err != nil {
			return nil, &FileError{Path: name, Err: fmt.Errorf("JSON: %w", err)}
		}
		return vals, nil
	case ext == ".ini" || ext == ".cfg" || base == "credentials" || base == "config":
		return parseINI(name, data)
	default:
		return parseDotenv(name, data)
	}
}

// isJSONDoc reports whether data is a JSON object or array.
func isJSONDoc(data []byte) bool {
	t := bytes.TrimSpace(data)
	return len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t)
}

// parseJSON returns every string leaf of the JSON document in data.
// Numbers, booleans and object keys are not secrets by this rule.
func parseJSON(data []byte) ([]string, error) {
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	var vals []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			vals = append(vals, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	return vals, nil
}

// parseINI returns the values of an INI file: "key = value" or "key: value"
// under [section] headers, with ';' and '#' comment lines. An indented line
// with no separator continues the value above and counts as a value itself.
// Taking ':' as well as '=' also reads the simple YAML of ~/.kube/config.
func parseINI(name string, data []byte) ([]string, error) {
	var vals []string
	for i, line := range lines(data) {
		n := i + 1
		t := strings.TrimSpace(line)
		switch {
		case t == "" || t[0] == '#' || t[0] == ';':
			continue
		case t[0] == '[':
			if !strings.HasSuffix(t, "]") {
				return nil, &FileError{Path: name, Line: n, Err: errors.New("section header without a closing ]")}
			}
			continue
		}
		i := strings.IndexAny(t, "=:")
		if i < 0 {
			if line[0] != ' ' && line[0] != '\t' {
				return nil, &FileError{Path: name, Line: n, Err: errors.New("want [section] or key = value (INI)")}
			}
			vals = append(vals, t)
			continue
		}
		vals = append(vals, unquote(strings.TrimSpace(t[i+1:])))
	}
	return vals, nil
}

// parseDotenv returns the values of a dotenv file: "KEY=value" lines, each
// perhaps after "export ", with '#' comment lines and a " #" comment after
// an unquoted value. A single- or double-quoted value may span lines; in a
// double-quoted one, \n, \", \\ are escapes. A file of one line that is not
// KEY=value is a token file: the line is the value. So is one whose line
// ends in its only '=' or '='s, such as a base64 token with padding
// ("c2VjcmV0IQ=="): an empty assignment would hold no secret anyway.
func parseDotenv(name string, data []byte) ([]string, error) {
	var (
		vals    []string
		bad     int // the first line that is not KEY=value
		content int // lines that are not blank or comments
		only    string
		padded  bool // the last assignment's value is empty or all '='
	)
	ls := lines(data)
	for k := 0; k < len(ls); k++ {
		n, line := k+1, ls[k]
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		content++
		only = t
		key, rest, ok := dotenvAssign(t)
		if !ok {
			if bad == 0 {
				bad = n
			}
			continue
		}
		padded = strings.Trim(rest, "=") == ""
		if rest == "" || (rest[0] != '"' && rest[0] != '\'') {
			if i := strings.Index(rest, " #"); i >= 0 {
				rest = rest[:i]
			}
			vals = append(vals, strings.TrimSpace(rest))
			continue
		}
		v, used, ok := dotenvQuoted(rest, ls[k+1:])
		if !ok {
			return nil, &FileError{Path: name, Line: n, Err: fmt.Errorf("%s: quoted value never closed", key)}
		}
		vals = append(vals, v)
		k += used
	}
	switch {
	case content == 1 && (bad != 0 || padded):
		return []string{only}, nil
	case bad == 0:
		return vals, nil
	default:
		return nil, &FileError{Path: name, Line: bad, Err: errors.New("want KEY=value (dotenv); name a JSON file .json and an INI file .ini")}
	}
}

// dotenvAssign splits "[export ]KEY=rest".
func dotenvAssign(t string) (key, rest string, ok bool) {
	if s, found := strings.CutPrefix(t, "export"); found && s != "" && (s[0] == ' ' || s[0] == '\t') {
		t = strings.TrimSpace(s)
	}
	key, rest, ok = strings.Cut(t, "=")
	key = strings.TrimSpace(key)
	if !ok || !isEnvKey(key) {
		return "", "", false
	}
	return key, strings.TrimSpace(rest), true
}

// isEnvKey reports whether k is a dotenv key: a letter or '_', then
// letters, digits, '_', '.' or '-'.
func isEnvKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return k != ""
}

// dotenvQuoted reads the quoted value that starts rest, continuing into
// more lines until the closing quote. It returns the value and how many of
// more it used.
func dotenvQuoted(rest string, more []string) (string, int, bool) {
	q := rest[0]
	var b strings.Builder
	s := rest[1:]
	for used := 0; ; used++ {
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == q:
				return b.String(), used, true
			case q == '"' && c == '\\' && i+1 < len(s):
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case '"', '\\':
					b.WriteByte(s[i])
				default:
					b.WriteByte('\\')
					b.WriteByte(s[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		if used == len(more) {
			return "", 0, false
		}
		b.WriteByte('\n')
		s = more[used]
	}
}

// lines splits data into lines, without their "\n" or "\r\n".
func lines(data []byte) []string {
	ls := strings.Split(string(data), "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}

// unquote strips one pair of matching single or double quotes around s.
func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
