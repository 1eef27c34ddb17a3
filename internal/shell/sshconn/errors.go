package sshconn

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/tandem-sh/tandem/internal/shell"
)

var (
	// ErrAuth means the server accepted none of the credentials offered,
	// or a credential could not be used: a wrong or missing passphrase, an
	// unreachable agent, no credential at all.
	ErrAuth = errors.New("authentication failed")
	// ErrKey means private key material could not be read or parsed (a
	// missing file, not a private key). A wrong passphrase is ErrAuth.
	ErrKey = errors.New("unusable private key")
	// ErrHostKey means the server's host key was refused: unknown under
	// the Strict policy, different from the pinned key, or revoked. The
	// error is a *HostKeyError with the details.
	ErrHostKey = errors.New("host key verification failed")
	// ErrConnect means the host could not be reached as an SSH server:
	// connection refused, a name that does not resolve, or a port that
	// does not speak SSH.
	ErrConnect = errors.New("cannot connect")
	// ErrTimeout means the TCP connect, SSH handshake or shell start took
	// longer than Options.ConnectTimeout.
	ErrTimeout = errors.New("connect timed out")
	// ErrNoForeground is shell.ErrNoForeground, kept here for callers of
	// this package.
	ErrNoForeground = shell.ErrNoForeground
)

// HostKeyError says why a host key was refused and where the known key
// lives, so a person can decide whether to trust the change. It wraps
// ErrHostKey.
type HostKeyError struct {
	// Addr is the host:port as dialed.
	Addr string
	// Key is the key the server presented.
	Key ssh.PublicKey
	// KnownHostsFile is the file that was consulted (and, under
	// AcceptNew, would have been appended to).
	KnownHostsFile string
	// Known lists the keys on file for Addr; empty when Addr is unknown.
	Known []knownhosts.KnownKey
	// Revoked is set when Key is marked @revoked in KnownHostsFile.
	Revoked bool
}

// Error says which host and key were refused, which key file is involved,
// and what a person can do about it.
func (e *HostKeyError) Error() string {
	offered := describeKey(e.Key)
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key %s of %s is marked @revoked in %s", offered, e.Addr, e.KnownHostsFile)
	case len(e.Known) == 0:
		return fmt.Sprintf("host %s is not in %s (it offered %s); hostKeyPolicy is strict, so add the key to that file first or use accept-new",
			e.Addr, e.KnownHostsFile, offered)
	}
	var known []string
	for _, k := range e.Known {
		known = append(known, fmt.Sprintf("%s (%s line %d)", describeKey(k.Key), k.Filename, k.Line))
	}
	return fmt.Sprintf("host key of %s has CHANGED: it offered %s but %s pins %s; refusing to connect, this may be a man-in-the-middle attack; if the change is expected, remove the old entry from %s",
		e.Addr, offered, e.KnownHostsFile, strings.Join(known, ", "), e.KnownHostsFile)
}

// Unwrap makes errors.Is(err, ErrHostKey) hold.
func (e *HostKeyError) Unwrap() error { return ErrHostKey }

func describeKey(k ssh.PublicKey) string {
	return k.Type() + " " + ssh.FingerprintSHA256(k)
}
