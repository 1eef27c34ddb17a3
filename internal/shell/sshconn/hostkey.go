package sshconn

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyPolicy says what Dial does with a host that KnownHostsFile does
// not list yet. A host whose key differs from the pinned one is refused
// under every policy. The values are the strings of ssh_connect's
// hostKeyPolicy parameter; the empty policy means AcceptNew.
type HostKeyPolicy string

const (
	// AcceptNew trusts an unknown host on first use and pins its key by
	// appending it to KnownHostsFile (OpenSSH's StrictHostKeyChecking
	// accept-new).
	AcceptNew HostKeyPolicy = "accept-new"
	// Strict refuses any host that KnownHostsFile does not list.
	Strict HostKeyPolicy = "strict"
)

// plainHostKeyAlgos are the host key algorithms offered for a host with no
// pinned key: certificates are left out, since only plain keys are pinned.
func plainHostKeyAlgos() []string {
	return []string{
		ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA,
	}
}

// hostKeyChecker verifies one dial's host key against a known_hosts file.
type hostKeyChecker struct {
	file   string
	policy HostKeyPolicy
	check  ssh.HostKeyCallback
}

func newHostKeyChecker(file string, trusted []string, policy HostKeyPolicy) (*hostKeyChecker, error) {
	if file == "" {
		return nil, errors.New("KnownHostsFile is required (it may name a file that does not exist yet)")
	}
	if policy == "" {
		policy = AcceptNew
	}
	if policy != AcceptNew && policy != Strict {
		return nil, fmt.Errorf("unknown HostKeyPolicy %q (want %q or %q)", policy, Strict, AcceptNew)
	}
	var files []string
	for _, f := range append([]string{file}, trusted...) {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f) // a file that does not exist pins nothing yet
		}
	}
	check, err := knownhosts.New(files...)
	if err != nil {
		return nil, fmt.Errorf("read known hosts: %w", err)
	}
	return &hostKeyChecker{file: file, policy: policy, check: check}, nil
}

// algorithms returns the host key algorithms to negotiate with addr: those
// of its pinned keys, so a server that also has a key of another type is
// not mistaken for a changed one.
func (h *hostKeyChecker) algorithms(addr string, remote net.Addr) []string {
	probe, _, _ := ed25519.GenerateKey(nil)
	probeKey, _ := ssh.NewPublicKey(probe)
	var ke *knownhosts.KeyError
	if !errors.As(h.check(addr, remote, probeKey), &ke) || len(ke.Want) == 0 {
		return plainHostKeyAlgos()
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return algos
}

func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// callback is the ssh.HostKeyCallback: it accepts a pinned key, pins an
// unknown one under AcceptNew, and refuses everything else.
func (h *hostKeyChecker) callback(addr string, remote net.Addr, key ssh.PublicKey) error {
	err := h.check(addr, remote, key)
	if err == nil {
		return nil
	}
	hkErr := &HostKeyError{Addr: addr, Key: key, KnownHostsFile: h.file}
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		hkErr.Revoked = true
		return hkErr
	case errors.As(err, &ke) && len(ke.Want) > 0:
		hkErr.Known = ke.Want
		return hkErr
	case errors.As(err, &ke) && h.policy == AcceptNew:
		return h.pin(addr, key)
	case errors.As(err, &ke):
		return hkErr
	}
	return fmt.Errorf("%w: %s: %v", ErrHostKey, addr, err)
}

// pin appends addr's key to the known hosts file.
func (h *hostKeyChecker) pin(addr string, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		return fmt.Errorf("pin host key of %s: %w", addr, err)
	}
	f, err := os.OpenFile(h.file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pin host key of %s: %w", addr, err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key) + "\n"
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			line = "\n" + line
		}
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pin host key of %s in %s: %w", addr, h.file, err)
	}
	return nil
}
