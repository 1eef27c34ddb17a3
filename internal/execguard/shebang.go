package execguard

import "bytes"

// shebangBuf is how much of a file the kernel reads to choose how to run
// it (BINPRM_BUF_SIZE); a #! line longer than this is cut.
const shebangBuf = 256

// ParseShebang reads a file's first bytes as the kernel's binfmt_script
// does (fs/binfmt_script.c): after "#!" and blanks, the interpreter runs
// to the next blank, and the rest of the line, trimmed of blanks, is its
// one optional argument. Only the first 256 bytes count; a line that does
// not end within them is cut there unless its interpreter's name would be
// cut too (the kernel then refuses it). ok is false when the kernel would
// not run the file as a script, or would find no interpreter by an empty
// name. The kernel then starts
// [interp, arg (if any), the script's path, argv[1:]…] without another
// execve.
func ParseShebang(head []byte) (interp, arg string, hasArg, ok bool) {
	if len(head) < 2 || head[0] != '#' || head[1] != '!' {
		return "", "", false, false
	}
	// The kernel's buffer is zeroed past the end of a short file.
	var buf [shebangBuf]byte
	copy(buf[:], head)
	last := len(buf) - 1
	end := bytes.IndexByte(buf[:], '\n')
	if end < 0 {
		p := nextNonBlank(buf[:], 2, last)
		if p < 0 || nextTerminator(buf[:], p, last) < 0 {
			return "", "", false, false // all blanks, or a cut interpreter name
		}
		end = last
	}
	for blank(buf[end-1]) {
		end--
	}
	name := nextNonBlank(buf[:], 2, end)
	if name < 0 || name == end {
		return "", "", false, false
	}
	sep := nextTerminator(buf[:], name, end)
	nameEnd := end
	if sep >= 0 {
		nameEnd = sep
		if buf[sep] != 0 {
			if a := nextNonBlank(buf[:], sep, end); a >= 0 {
				arg, hasArg = cString(buf[a:end]), true
			}
		}
	}
	if interp = cString(buf[name:nameEnd]); interp == "" {
		// "#!" then NUL: the kernel looks for a file named "" and fails.
		return "", "", false, false
	}
	return interp, arg, hasArg, true
}

func blank(c byte) bool { return c == ' ' || c == '\t' }

// nextNonBlank is the index of the first byte in b[first..last] that is
// not a blank, or -1.
func nextNonBlank(b []byte, first, last int) int {
	for ; first <= last; first++ {
		if !blank(b[first]) {
			return first
		}
	}
	return -1
}

// nextTerminator is the index of the first blank or NUL in b[first..last],
// or -1.
func nextTerminator(b []byte, first, last int) int {
	for ; first <= last; first++ {
		if blank(b[first]) || b[first] == 0 {
			return first
		}
	}
	return -1
}

// cString is b up to its first NUL, as the kernel's strings end there.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
