package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Access rights granted by the rules. They are intersected with what the
// chosen ABI handles, so rights the kernel does not know are simply not
// requested, while everything it does know stays denied unless granted.
const (
	accessRead landlock.AccessFSSet = llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir

	// accessWrite is full write access except creating device nodes: a
	// device node made in the workspace would reach whatever it names (a
	// raw disk) through a path the policy allows.
	accessWrite landlock.AccessFSSet = llsys.AccessFSWriteFile | llsys.AccessFSTruncate |
		llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeDir |
		llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo |
		llsys.AccessFSMakeSym | llsys.AccessFSRefer |
		// ABI 9+: connecting to UNIX sockets by path, allowed only where
		// the program may write (its workspace and TMPDIR).
		llsys.AccessFSResolveUnix

	// accessFileOnly is what the kernel accepts on a rule for a non-directory.
	accessFileOnly landlock.AccessFSSet = llsys.AccessFSExecute | llsys.AccessFSReadFile |
		llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev

	accessDevRW landlock.AccessFSSet = llsys.AccessFSReadFile | llsys.AccessFSWriteFile | llsys.AccessFSTruncate
	accessTTY   landlock.AccessFSSet = accessDevRW | llsys.AccessFSIoctlDev
)

// configFor returns the preset that handles everything the kernel's ABI
// can restrict (capped at the newest ABI go-landlock knows). It is used
// without BestEffort: if the kernel cannot enforce it, Restrict fails
// instead of quietly restricting less. With network allowed, network
// access rights are left unhandled, i.e. allowed.
func configFor(abi int, network bool) landlock.Config {
	presets := [...]landlock.Config{
		landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6,
		landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11,
	}
	cfg := presets[min(abi, len(presets))-1]
	if network {
		cfg.HandledAccessNet = 0
	}
	return cfg
}

// restrict confines the calling process (all threads) to p. Scoped IPC
// (V6+) is part of the preset: the program cannot signal processes outside
// its sandbox, tandem included, nor reach their abstract UNIX sockets.
func restrict(abi int, p Policy) error {
	cfg := configFor(abi, p.Network)
	if p.Namespace {
		// In a namespace of its own the program may bind any port: the
		// only interface is its own loopback, which nothing outside
		// reaches but tandem (a preview, through the socket helper).
		// listen without bind already took a port there.
		cfg.HandledAccessNet &^= llsys.AccessNetBindTCP
	}
	rules, err := pathRules(cfg.HandledAccessFS, p)
	if err != nil {
		return err
	}
	// With network access handled, every TCP bind and connect is denied
	// but connecting to the ports listed.
	if !p.Network {
		for _, port := range p.ConnectPorts {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	return cfg.Restrict(rules...)
}

// pathRules turns the policy into Landlock rules, plus the device files
// every terminal program needs.
func pathRules(handled landlock.AccessFSSet, p Policy) ([]landlock.Rule, error) {
	var rules []landlock.Rule
	for _, path := range p.ReadWrite {
		r, err := pathRule(handled, path, accessRead|accessWrite)
		if err != nil {
			return nil, fmt.Errorf("read-write path: %w", err)
		}
		rules = append(rules, r)
	}
	for _, path := range p.ReadOnly {
		r, err := pathRule(handled, path, accessRead)
		if errors.Is(err, fs.ErrNotExist) {
			continue // nothing there to read
		}
		if err != nil {
			return nil, fmt.Errorf("read-only path: %w", err)
		}
		rules = append(rules, r)
	}
	return append(rules, deviceRules(handled)...), nil
}

// pathRule grants access on path, restricted to the file rights when path
// is not a directory (the kernel rejects directory rights on files).
func pathRule(handled landlock.AccessFSSet, path string, access landlock.AccessFSSet) (landlock.Rule, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		access &= accessFileOnly
	}
	return landlock.PathAccess(access&handled, path), nil
}

// deviceRules grants the devices a shell and its programs expect: the
// terminal (with ioctl, so programs opening /dev/tty can set it up),
// /dev/null and friends, the random devices, and listing /dev. Devices
// missing on this host are skipped.
func deviceRules(handled landlock.AccessFSSet) []landlock.Rule {
	grant := func(access landlock.AccessFSSet, paths ...string) landlock.Rule {
		return landlock.PathAccess(access&handled, paths...).IgnoreIfMissing()
	}
	return []landlock.Rule{
		grant(accessDevRW, "/dev/null", "/dev/zero", "/dev/full"),
		grant(accessTTY, "/dev/tty", "/dev/ptmx"),
		grant(accessTTY|llsys.AccessFSReadDir, "/dev/pts"),
		grant(llsys.AccessFSReadFile, "/dev/random", "/dev/urandom"),
		grant(llsys.AccessFSReadDir, "/dev"),
	}
}
