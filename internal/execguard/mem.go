package execguard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"unsafe"

	"golang.org/x/sys/unix"
)

const pageSize = 4096 // reads never cross this boundary, so a short read is an unmapped page

// mem reads another process's memory with process_vm_readv.
type mem struct {
	pid int
	buf [pageSize]byte
}

// read fills b from addr, one page at a time.
func (m *mem) read(addr uint64, b []byte) error {
	for len(b) > 0 {
		chunk := min(len(b), pageSize-int(addr%pageSize))
		local := []unix.Iovec{{Base: &b[0]}}
		local[0].SetLen(chunk)
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: chunk}}
		n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
		if err != nil {
			return fmt.Errorf("read %#x of pid %d: %w", addr, m.pid, err)
		}
		if n != chunk {
			return fmt.Errorf("read %#x of pid %d: short read", addr, m.pid)
		}
		b, addr = b[chunk:], addr+uint64(chunk)
	}
	return nil
}

// str reads a NUL-terminated string of at most max bytes. full is false
// when the string is longer (s is then its first max bytes).
func (m *mem) str(addr uint64, max int) (s string, full bool, err error) {
	if addr == 0 {
		return "", false, errors.New("NULL pointer")
	}
	var out []byte
	for len(out) < max {
		chunk := min(max-len(out), pageSize-int(addr%pageSize))
		if err := m.read(addr, m.buf[:chunk]); err != nil {
			return "", false, err
		}
		if i := bytes.IndexByte(m.buf[:chunk], 0); i >= 0 {
			return string(append(out, m.buf[:i]...)), true, nil
		}
		out = append(out, m.buf[:chunk]...)
		addr += uint64(chunk)
	}
	return string(out), false, nil
}

// argv reads a NULL-terminated array of string pointers, within MaxArgs
// and MaxArgBytes.
func (m *mem) argv(addr uint64) (argv []string, truncated bool, err error) {
	if addr == 0 {
		return nil, false, nil // Linux treats a NULL argv as empty
	}
	const ptr = int(unsafe.Sizeof(uintptr(0)))
	budget := MaxArgBytes
	var pbuf [pageSize]byte
	for {
		chunk := min(pageSize-int(addr%pageSize), (MaxArgs-len(argv))*ptr)
		chunk -= chunk % ptr
		if chunk == 0 {
			return argv, true, nil
		}
		if err := m.read(addr, pbuf[:chunk]); err != nil {
			return nil, false, err
		}
		for i := 0; i < chunk; i += ptr {
			p := binary.LittleEndian.Uint64(pbuf[i : i+ptr])
			if p == 0 {
				return argv, false, nil
			}
			if budget <= 0 {
				return argv, true, nil
			}
			s, full, err := m.str(p, budget)
			if err != nil {
				return nil, false, err
			}
			argv = append(argv, s)
			budget -= len(s) + 1
			if !full {
				return argv, true, nil
			}
		}
		addr += uint64(chunk)
	}
}

// cleanAbs cleans an absolute path.
func cleanAbs(p string) string { return path.Clean(p) }
