// Package instance tells live tandem processes that share a data dir from
// dead ones. Each process holds an exclusive lock on its own file under
// the data dir for its whole life; the kernel drops the lock when the
// process dies, even by SIGKILL, so a lock another process can take names a
// dead instance at once, with no heartbeat to wait out. It knows files and
// locks only, nothing of sessions or stores.
package instance

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Instance is this process's registration in a data dir.
type Instance struct {
	ID   string
	dir  string
	lock *os.File
}

func lockDir(dataDir string) string { return filepath.Join(dataDir, "instances") }

// Acquire registers this process with a new random id and holds its lock
// until Release (or until the process dies).
func Acquire(dataDir string) (*Instance, error) {
	dir := lockDir(dataDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	id := "inst_" + hex.EncodeToString(b)
	f, err := os.OpenFile(filepath.Join(dir, id+".lock"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("instance: lock %s: %w", id, err)
	}
	return &Instance{ID: id, dir: dir, lock: f}, nil
}

// Release ends the registration: the lock file goes, and the process is no
// longer counted as live.
func (in *Instance) Release() error {
	if in == nil || in.lock == nil {
		return nil
	}
	err := errors.Join(os.Remove(in.lock.Name()), in.lock.Close())
	in.lock = nil
	return err
}

// Alive reports whether the instance id is held by a live process of this
// data dir. An id with no lock file (released, or never of this dir) is
// not alive.
func Alive(dataDir, id string) (bool, error) {
	if strings.ContainsAny(id, "/\\") || id == "" {
		return false, fmt.Errorf("instance: bad id %q", id)
	}
	f, err := os.OpenFile(filepath.Join(lockDir(dataDir), id+".lock"), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("instance: %w", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("instance: %w", err)
	}
	// We got the lock: its owner is gone. Clean up after it.
	_ = os.Remove(f.Name())
	return false, nil
}

// Describe stores info (typically JSON: the process's addresses, mode and
// start) in this instance's lock file, mode 0600 in a 0700 directory, for
// [Live] to read back: so that a command run later can name every live
// tandem of the data dir, and nothing names a dead one.
func (in *Instance) Describe(info []byte) error {
	if in == nil || in.lock == nil {
		return errors.New("instance: released")
	}
	if err := in.lock.Truncate(0); err != nil {
		return fmt.Errorf("instance: describe: %w", err)
	}
	if _, err := in.lock.WriteAt(info, 0); err != nil {
		return fmt.Errorf("instance: describe: %w", err)
	}
	return nil
}

// File is where Describe keeps this instance's description.
func (in *Instance) File() string { return filepath.Join(in.dir, in.ID+".lock") }

// Described is one live instance and what it said of itself.
type Described struct {
	ID   string
	Info []byte // empty if it has not described itself (yet)
	// File is where Info is kept, readable by the data dir's owner only.
	File string
}

// Live lists the instances of dataDir whose process is alive, with what
// each stored with Describe. Dead instances are skipped, and their lock
// files removed on the way, as [Alive] does.
func Live(dataDir string) ([]Described, error) {
	entries, err := os.ReadDir(lockDir(dataDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("instance: %w", err)
	}
	var out []Described
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok {
			continue
		}
		alive, err := Alive(dataDir, id)
		if err != nil || !alive {
			continue
		}
		file := filepath.Join(lockDir(dataDir), e.Name())
		info, _ := os.ReadFile(file)
		out = append(out, Described{ID: id, Info: info, File: file})
	}
	return out, nil
}
