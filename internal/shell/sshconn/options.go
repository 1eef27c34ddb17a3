package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/tandem-sh/tandem/internal/quickack"
	"github.com/tandem-sh/tandem/internal/shell"
)

// Options says how to reach one SSH target and how to watch the link; it
// is the ssh backend's shell.Dialer. Dial does not modify it, so one
// Options may serve many concurrent dials.
type Options struct {
	// Host is the server's name or IP address. Required.
	Host string
	// Port is the server's TCP port; zero means 22.
	Port int
	// User is the login name. Required.
	User string

	// Password is tried for keyboard-interactive (answering hidden
	// prompts) and password authentication; empty means neither.
	Password string
	// PrivateKey is a private key's content (OpenSSH or PEM format).
	PrivateKey []byte
	// KeyFile names a private key file, read at each Dial.
	KeyFile string
	// Passphrase decrypts PrivateKey and KeyFile when they are encrypted.
	Passphrase string
	// UseAgent offers the keys of the ssh-agent listening on AgentSocket.
	UseAgent bool
	// AgentSocket is the agent's unix socket (the caller's SSH_AUTH_SOCK);
	// required when UseAgent is set.
	AgentSocket string

	// KnownHostsFile is the OpenSSH known_hosts file that host keys are
	// checked against and pinned in. Required; it need not exist yet.
	KnownHostsFile string
	// HostKeyPolicy decides about hosts not in KnownHostsFile; empty means
	// AcceptNew. A changed key is refused under every policy.
	HostKeyPolicy HostKeyPolicy
	// TrustedKnownHosts are further known_hosts files whose keys are
	// trusted (the user's own ~/.ssh/known_hosts): read, never written.
	TrustedKnownHosts []string

	// ConnectTimeout bounds the TCP connect, SSH handshake and shell start
	// together; zero means 10s.
	ConnectTimeout time.Duration
	// KeepaliveInterval is how often a keepalive@openssh.com request is
	// sent, and how long each may go unanswered; zero means 5s.
	KeepaliveInterval time.Duration
	// KeepaliveMax is how many unanswered intervals in a row end the
	// connection with shell.ErrConnectionLost; zero means 3.
	KeepaliveMax int
}

// Default values of the Options fields left zero.
const (
	DefaultPort              = 22
	DefaultConnectTimeout    = 10 * time.Second
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveMax      = 3
)

// Dial connects, authenticates, checks the host key, and starts
// l.Command (the login shell when empty) in a PTY of l.Cols x l.Rows
// (80x24 when zero). It gives up with ErrTimeout when ConnectTimeout
// passes, and with ctx's error when ctx ends first. l.Env is ignored:
// servers usually refuse environment requests.
func (o *Options) Dial(ctx context.Context, l shell.Launch) (shell.Conn, error) {
	if l.Proxy != nil {
		return nil, errors.New("ssh dial: a network allowlist applies to sandboxed local targets only: tandem cannot confine a remote host's network")
	}
	port := o.Port
	if port == 0 {
		port = DefaultPort
	}
	// Host names are case-insensitive: a pin for "localhost" must hold for
	// "LOCALHOST" too, so the name is folded before it is dialed or pinned.
	// A pin still belongs to a name: 127.0.0.2 or ::1 are other names.
	addr := net.JoinHostPort(strings.ToLower(o.Host), strconv.Itoa(port))
	c, err := o.dial(ctx, addr, l)
	if err != nil {
		return nil, fmt.Errorf("sshconn: dial %s@%s: %w", o.User, addr, err)
	}
	return c, nil
}

func (o *Options) dial(ctx context.Context, addr string, l shell.Launch) (*conn, error) {
	if o.Host == "" || o.User == "" {
		return nil, errors.New("options: Host and User are required")
	}
	hosts, err := newHostKeyChecker(o.KnownHostsFile, o.TrustedKnownHosts, o.HostKeyPolicy)
	if err != nil {
		return nil, err
	}
	timeout := orDefault(o.ConnectTimeout, DefaultConnectTimeout)
	dialCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// timedOut turns an error caused by dialCtx's deadline into ErrTimeout,
	// and one caused by ctx into ctx's error.
	timedOut := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var netErr net.Error
		if dialCtx.Err() != nil || errors.As(err, &netErr) && netErr.Timeout() {
			return fmt.Errorf("%w after %v: %v", ErrTimeout, timeout, err)
		}
		return err
	}

	auth, release, err := o.authMethods(dialCtx)
	if err != nil {
		return nil, timedOut(err)
	}
	defer release()
	nc, err := connectTCP(dialCtx, addr)
	if err != nil {
		if err := timedOut(err); errors.Is(err, ErrTimeout) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrConnect, err)
	}
	// The deadline bounds the handshake and the shell's start; dialCtx
	// ending (ctx cancelled) moves it to the past so blocked I/O fails now.
	deadline, _ := dialCtx.Deadline()
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(dialCtx, func() { nc.SetDeadline(time.Unix(1, 0)) })

	client, err := o.handshake(quickack.Wrap(nc), addr, hosts, auth)
	if err != nil {
		stop()
		nc.Close()
		if errors.Is(err, ErrHostKey) || errors.Is(err, ErrAuth) {
			return nil, err
		}
		if err := timedOut(err); errors.Is(err, ErrTimeout) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s did not complete an SSH handshake (is it an SSH server?): %v", ErrConnect, addr, err)
	}
	c := newConn(addr, nc, client)
	if err := c.startShell(l); err != nil {
		stop()
		c.Close()
		return nil, timedOut(fmt.Errorf("start shell: %w", err))
	}
	if !stop() {
		c.Close()
		return nil, timedOut(context.Cause(dialCtx))
	}
	nc.SetDeadline(time.Time{})
	c.watch(orDefault(o.KeepaliveInterval, DefaultKeepaliveInterval), orDefault(o.KeepaliveMax, DefaultKeepaliveMax))
	c.startHelper()
	return c, nil
}

// connectTCP opens the TCP connection with Nagle's algorithm off.
func connectTCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		// Keystrokes are tiny writes whose latency Nagle would add to; Go
		// turns it off by default, but this must not depend on a default.
		if err := tc.SetNoDelay(true); err != nil {
			nc.Close()
			return nil, fmt.Errorf("disable Nagle: %w", err)
		}
	}
	return nc, nil
}

// handshake runs the SSH handshake on nc: key exchange, host key check,
// authentication. A refused host key is a *HostKeyError; refused
// credentials wrap ErrAuth.
func (o *Options) handshake(nc net.Conn, addr string, hosts *hostKeyChecker, auth []ssh.AuthMethod) (*ssh.Client, error) {
	var hostKeyOK atomic.Bool
	cfg := &ssh.ClientConfig{
		User: o.User,
		Auth: auth,
		HostKeyCallback: func(h string, r net.Addr, k ssh.PublicKey) error {
			err := hosts.callback(h, r, k)
			hostKeyOK.Store(err == nil)
			return err
		},
		HostKeyAlgorithms: hosts.algorithms(addr, nc.RemoteAddr()),
		ClientVersion:     "SSH-2.0-tandem",
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, addr, cfg)
	if err != nil {
		var hkErr *HostKeyError
		switch {
		case errors.As(err, &hkErr):
			return nil, hkErr
		case hostKeyOK.Load() && isAuthFailure(err):
			return nil, fmt.Errorf("%w: %w", ErrAuth, err)
		case !hostKeyOK.Load() && strings.Contains(err.Error(), "no common algorithm for host key"):
			// Only the pinned key types were offered, and the server has
			// none of them: its keys changed as far as the pins can tell.
			return nil, fmt.Errorf("%w: %s pins host key types %v for %s, and the server offers none of them; if its keys changed on purpose, remove its entries from %s",
				ErrHostKey, hosts.file, cfg.HostKeyAlgorithms, addr, hosts.file)
		}
		return nil, err
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// orDefault returns def for a zero (or negative) v.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
