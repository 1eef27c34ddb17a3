// Package target resolves where a session runs: a target named in
// tandem.yaml, or ad-hoc SSH parameters where the config allows them. It is
// the one place that turns configuration into a shell backend (ssh or
// local), so the layers above never build a backend themselves.
package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/execguard"
	"github.com/tandem-sh/tandem/internal/redact"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/seal"
	"github.com/tandem-sh/tandem/internal/session"
	"github.com/tandem-sh/tandem/internal/shell/local"
	"github.com/tandem-sh/tandem/internal/shell/sshconn"
)

// Errors the mcp layer maps to stable codes.
var (
	ErrUnknown            = errors.New("unknown target")
	ErrAdHocRefused       = errors.New("ad-hoc host parameters are not allowed")
	ErrSandboxUnavailable = errors.New("sandbox unavailable")
	// ErrCredentials is a configured credential the server cannot load.
	ErrCredentials = errors.New("target credentials unavailable")
	// ErrRedaction is a secret file or key of the redact settings that
	// cannot be used: the session would show secrets tandem was told to
	// hide, so it does not start. It is no fault of the SSH credentials.
	ErrRedaction = errors.New("redaction settings unusable")
)

// SSH holds ad-hoc connection parameters as an agent passes them.
type SSH struct {
	Host        string
	Port        int
	Username    string
	Password    string
	PrivateKey  string
	KeyFilePath string
	Passphrase  string
	UseAgent    bool
}

// Resolver turns target names and ad-hoc parameters into session targets.
type Resolver struct {
	Config *config.Config
	// Stdio says whether the server runs over stdio (ad hoc allowed by default).
	Stdio bool
	// Self is tandem's own executable, re-executed as the sandbox launcher.
	Self string
	// Home is the server user's home directory: its ~/.ssh/known_hosts is
	// trusted, never written.
	Home string
	// PinFile is tandem's own known_hosts, under its data dir: ad-hoc hosts
	// and targets without knownHosts are pinned there.
	PinFile string
	// AgentSocket is SSH_AUTH_SOCK of the server, for useAgent.
	AgentSocket string
	// RunDir is where local sessions get their private run dirs; it must lie
	// outside what sandboxed shells may read.
	RunDir string
	// Env is the base environment of local shells.
	Env []string
	// User is the server's user name, reported for local sessions.
	User string
	// Refused maps local targets that must not start sessions, keyed by
	// RefusedKey, to why (their workspace would expose tandem's own state to
	// the sandbox).
	Refused map[string]string
	// Implicit names the local target whose workspace is only tandem's
	// current directory (no config, no --workspace). Over stdio the
	// client's MCP roots may choose its workspace instead: the first answer
	// locks it.
	Implicit string
	// CheckRoot vets a workspace the client's roots name; an error refuses
	// it (the root, a home directory, one holding tandem's data dir).
	CheckRoot func(dir string) error
	// Log gets what only the operator may read: why a secret file that
	// tandem.yaml names could not be used, and, once, that sessions run
	// without network namespaces. Nil discards it.
	Log *slog.Logger
	// NoNetNamespace runs sandboxed local sessions without a network
	// namespace of their own, under the sandbox's fallback seccomp filter
	// (local.Options.NoNetNamespace), as on a host that refuses
	// namespaces: the operator's choice where namespaces misbehave, and
	// what tests use to try the fallback. False: each session without
	// network: true gets a namespace where the host allows one.
	NoNetNamespace bool

	mu   sync.Mutex
	root *rootChoice // nil until the client's roots were asked
	// noNetNS says why sandboxed sessions have no network namespace
	// ("" if they have one); netProbed once it is known.
	noNetNS   string
	netProbed bool
}

// probeTimeout bounds the one-time check that this host allows network
// namespaces.
const probeTimeout = 10 * time.Second

// CheckNetwork finds out, once, whether sandboxed local sessions can have
// network namespaces here, and logs it if they cannot; a config with no
// sandboxed local target without network: true needs none and skips it.
// Named does it on first use otherwise.
func (r *Resolver) CheckNetwork() {
	var all []config.Target
	if r.Config != nil {
		all = append(all, r.Config.Targets...)
		for _, tn := range r.Config.Tenants {
			all = append(all, tn.Targets...)
		}
	}
	for _, t := range all {
		if t.Kind == "local" && t.Sandbox != "none" && !t.Network.On {
			r.netFallback()
			return
		}
	}
}

// netFallback says why sandboxed local sessions run under the fallback
// filter instead of a network namespace, or "" if they get one. The host
// is probed once (a few milliseconds); a refusal is logged once.
func (r *Resolver) netFallback() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.netProbed {
		return r.noNetNS
	}
	r.netProbed = true
	if r.NoNetNamespace {
		r.noNetNS = "network namespaces are turned off for this tandem (TANDEM_NETNS=off)"
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		if err := sandbox.ProbeNamespace(ctx, r.Self); err != nil {
			r.noNetNS = err.Error()
		}
		cancel()
	}
	if r.noNetNS != "" && r.Log != nil {
		r.Log.Warn("sandboxed local sessions get no network namespace of their own: a seccomp filter refuses what Landlock's TCP rules do not see "+
			"(UDP, raw sockets, MPTCP, TCP Fast Open, listen, io_uring) instead, and an allowlist's proxy port is on this host's loopback", "why", r.noNetNS)
	}
	return r.noNetNS
}

// rootChoice is the locked outcome of the client's first roots answer.
type rootChoice struct {
	dir string // the workspace; "" keeps tandem's current directory
	err error  // why the roots' workspace was refused
}

// WantsRoot reports whether connecting to target name of tenant should
// first ask the client for its roots: the target is the implicit one and
// no answer has locked its workspace yet.
func (r *Resolver) WantsRoot(tenant, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Implicit != "" && tenant == config.DefaultTenant && name == r.Implicit && r.root == nil
}

// LockRoot takes the client's first roots answer (local paths, in the
// client's order; none means keep tandem's current directory). Only the
// first call counts: it returns whether it did, and the workspace then
// stays, whatever the client says later.
func (r *Resolver) LockRoot(dirs []string) (locked bool, dir string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root != nil {
		return false, r.root.dir, r.root.err
	}
	c := &rootChoice{}
	if len(dirs) > 0 {
		c.dir = filepath.Clean(dirs[0])
		if fi, serr := os.Stat(c.dir); serr != nil || !fi.IsDir() {
			c.err = fmt.Errorf("the client's root %s is not an existing directory", c.dir)
		} else if r.CheckRoot != nil {
			c.err = r.CheckRoot(c.dir)
		}
	}
	r.root = c
	return true, c.dir, c.err
}

// rooted returns the locked roots workspace of the implicit target.
func (r *Resolver) rooted(tenant, name string) (*rootChoice, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root == nil || r.Implicit == "" || tenant != config.DefaultTenant || name != r.Implicit {
		return nil, false
	}
	return r.root, r.root.err != nil || r.root.dir != ""
}

// RefusedKey keys [Resolver.Refused]: target names are per tenant.
func RefusedKey(tenant, name string) string { return tenant + "/" + name }

// scope returns the targets a caller of tenant with a claim for workspace
// may reach. A tenant or workspace that does not exist reaches nothing.
func (r *Resolver) scope(tenant, workspace string) (*config.Tenant, []string) {
	tn, ok := r.Config.Tenant(tenant)
	if !ok {
		return nil, nil
	}
	names, _ := tn.InScope(workspace)
	return tn, names
}

// DefaultName is the target used when ssh_connect names none: the only
// target in the caller's scope, if there is exactly one.
func (r *Resolver) DefaultName(tenant, workspace string) (string, error) {
	_, names := r.scope(tenant, workspace)
	if len(names) == 1 {
		return names[0], nil
	}
	return "", fmt.Errorf("%w: no target given; choose one of: %s", ErrUnknown, list(names))
}

func list(names []string) string {
	if len(names) == 0 {
		return "(none configured)"
	}
	return strings.Join(names, ", ")
}

// Named resolves a target of the caller's tenant and workspace. A target
// outside them gets the same answer as one that does not exist, so that a
// caller never learns what another tenant has.
func (r *Resolver) Named(tenant, workspace, name string) (session.Target, error) {
	tn, names := r.scope(tenant, workspace)
	t, ok := config.Target{}, false
	if tn != nil && slices.Contains(names, name) {
		t, ok = tn.Target(name)
	}
	if !ok {
		return session.Target{}, fmt.Errorf("%w %q: the targets you can use are %s", ErrUnknown, name, list(names))
	}
	keepalive := time.Duration(r.Config.Limits.KeepaliveInterval)
	switch t.Kind {
	case "local":
		if root, ok := r.rooted(tenant, name); ok {
			if root.err != nil {
				return session.Target{}, fmt.Errorf("%w: %v; pass --workspace DIR with the project directory", ErrSandboxUnavailable, root.err)
			}
			t.Workspace = root.dir
		} else if why, bad := r.Refused[RefusedKey(tenant, name)]; bad {
			return session.Target{}, fmt.Errorf("%w: %s", ErrSandboxUnavailable, why)
		}
		o := &local.Options{
			Workspace: t.Workspace, Network: t.Network.On, NoSandbox: t.Sandbox == "none",
			Self: r.Self, RunDirParent: r.RunDir, Env: r.Env, UnixSockets: t.UnixSockets,
		}
		if r.Home != "" {
			o.UserRC = filepath.Join(r.Home, ".bashrc")
		}
		if len(t.ReadOnly) > 0 {
			o.ReadOnly = append(sandbox.DefaultReadOnly(), t.ReadOnly...)
		}
		layer := sandbox.NetHost
		var noNetNS string
		if !o.NoSandbox {
			if err := (sandbox.Policy{Network: t.Network.On}).Supported(); err != nil {
				return session.Target{}, fmt.Errorf("%w: target %q needs Landlock: %v; set sandbox: none on the target to run it unconfined", ErrSandboxUnavailable, name, err)
			}
			if err := execguard.Available(); err != nil {
				return session.Target{}, fmt.Errorf("%w: target %q: tandem checks every unix socket a sandboxed session connects to with seccomp user notification, and %v; set sandbox: none on the target to run it unconfined", ErrSandboxUnavailable, name, err)
			}
			if !o.Network {
				layer = sandbox.NetNamespace
				if noNetNS = r.netFallback(); noNetNS != "" {
					layer, o.NoNetNamespace = sandbox.NetSeccomp, true
				}
			}
		}
		egr, held, err := r.egressOf(name, t.Network)
		if err != nil {
			return session.Target{}, err
		}
		red, err := r.redactionFor(tenant, name, t.Workspace, true, held)
		if err != nil {
			return session.Target{}, err
		}
		t := session.Target{Name: name, Kind: "local", Host: "localhost", Username: r.User, Dialer: o, Workspace: t.Workspace, Scope: workspace, Egress: egr}
		red.apply(&t)
		if t.RedactHeld, err = heldRedactor(held); err != nil {
			return session.Target{}, fmt.Errorf("%w: target %q: %w", ErrCredential, name, err)
		}
		if !o.NoSandbox {
			e := sandbox.Describe(layer)
			if noNetNS != "" {
				e = e.Fallback(noNetNS)
			}
			if egr != nil {
				e = e.Proxied()
			}
			t.Sandbox = e
		}
		return t, nil
	default:
		o := &sshconn.Options{
			Host: t.Host, Port: t.Port, User: t.User, KeyFile: t.KeyFile, UseAgent: t.UseAgent,
			AgentSocket: r.AgentSocket, HostKeyPolicy: sshconn.HostKeyPolicy(t.HostKeyPolicy), KeepaliveInterval: keepalive,
		}
		if t.PasswordFile != "" {
			pw, err := os.ReadFile(t.PasswordFile)
			if err != nil {
				// The path is the server's business; the agent learns only that the credential is missing.
				return session.Target{}, fmt.Errorf("%w: target %q: its password file cannot be read; ask the operator", ErrCredentials, name)
			}
			o.Password = strings.TrimRight(string(pw), "\r\n")
		}
		o.KnownHostsFile, o.TrustedKnownHosts = r.knownHosts(t.KnownHosts)
		red, err := r.redactionFor(tenant, name, r.Config.BaseDir(), false, sshSecrets(o))
		if err != nil {
			return session.Target{}, err
		}
		st := session.Target{Name: name, Kind: "ssh", Host: t.Host, Port: t.Port, Username: t.User, Dialer: o, Scope: workspace}
		red.apply(&st)
		return st, nil
	}
}

// AdHoc resolves ad-hoc SSH parameters, if the config allows them: over
// stdio by allowAdHoc (default on), in HTTP mode by the tenant's
// allowAdHoc (default off).
func (r *Resolver) AdHoc(tenant string, p SSH) (session.Target, error) {
	allowed := r.Config.AdHocAllowed(true)
	if !r.Stdio {
		tn, ok := r.Config.Tenant(tenant)
		allowed = ok && tn.AllowAdHoc
	}
	if !allowed {
		return session.Target{}, ErrAdHocRefused
	}
	if p.Port == 0 {
		p.Port = 22 // absent; an explicit 0 is refused by the caller
	}
	o := &sshconn.Options{
		Host: p.Host, Port: p.Port, User: p.Username, Password: p.Password,
		PrivateKey: []byte(p.PrivateKey), KeyFile: p.KeyFilePath, Passphrase: p.Passphrase,
		UseAgent: p.UseAgent, AgentSocket: r.AgentSocket,
		KeepaliveInterval: time.Duration(r.Config.Limits.KeepaliveInterval),
	}
	o.KnownHostsFile, o.TrustedKnownHosts = r.knownHosts("")
	if len(o.PrivateKey) == 0 {
		o.PrivateKey = nil
	}
	red, err := r.redactionFor(tenant, "", r.Config.BaseDir(), false, sshSecrets(o))
	if err != nil {
		return session.Target{}, err
	}
	st := session.Target{Kind: "ssh", Host: p.Host, Port: p.Port, Username: p.Username, Dialer: o}
	red.apply(&st)
	return st, nil
}

// knownHosts returns the file host keys are pinned in and the files that
// are trusted besides it. A target's own knownHosts is both. Otherwise
// pins go to tandem's file and the user's ~/.ssh/known_hosts is read but
// never written: an agent must not be able to add entries to it.
func (r *Resolver) knownHosts(configured string) (pin string, trusted []string) {
	if configured != "" {
		return configured, nil
	}
	pin = r.PinFile
	if pin == "" {
		pin = filepath.Join(r.Home, ".ssh", "known_hosts")
	}
	if r.Home != "" {
		trusted = []string{filepath.Join(r.Home, ".ssh", "known_hosts")}
	}
	return pin, trusted
}

// egressOf turns a target's network allowlist into what the session's
// proxy port serves (nil when the target has none), with the secrets of
// its credentials, which the session's redactor must know.
func (r *Resolver) egressOf(target string, n config.Network) (*session.Egress, []redact.Literal, error) {
	if !n.Proxied() {
		return nil, nil, nil
	}
	allow, err := egress.ParseEntries(n.AllowEntries())
	if err != nil {
		return nil, nil, fmt.Errorf("target %q: %w", target, err)
	}
	e := &session.Egress{Allow: allow, Ask: n.Ask != config.AskNo, Forward: n.Ask == config.AskForward}
	creds, held, err := r.credentials(target, n.Credentials)
	if err != nil {
		return nil, nil, err
	}
	e.Credentials = creds
	for name, addr := range n.Hosts {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("target %q: network.hosts.%s: %q is not an IP address", target, name, addr)
		}
		if e.Hosts == nil {
			e.Hosts = map[string][]netip.Addr{}
		}
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		e.Hosts[name] = append(e.Hosts[name], a.Unmap())
	}
	return e, held, nil
}

// redactionFor builds what keeps secrets out of a session's output: the redact
// sections for the tenant's target, with relative secret files read in dir
// (a local workspace when inWorkspace, or tandem.yaml's directory), and
// the credentials tandem holds for it, which are redacted whatever the
// config says. A workspace's files are opened beneath it (redact.Options
// Root); a relative file the workspace or tandem.yaml's directory lacks
// (a project with no .env) has no secrets until it appears; a missing
// absolute or "~/" file is an error. Nil when there is nothing to look
// for.
func (r *Resolver) redactionFor(tenant, target, dir string, inWorkspace bool, held []redact.Literal) (redaction, error) {
	red, err := r.buildRedaction(tenant, target, dir, inWorkspace, held)
	if err == nil {
		return red, nil
	}
	what := "ad-hoc ssh sessions"
	if target != "" {
		what = fmt.Sprintf("target %q", target)
	}
	var fe *redact.FileError
	if inWorkspace && errors.As(err, &fe) && !filepath.IsAbs(fe.Path) && !strings.HasPrefix(fe.Path, "~") {
		// A file of the workspace, which the agent may write and read:
		// the details help fix it.
		return redaction{}, fmt.Errorf("%w: %s: %v; fix the file, or ask the operator to fix tandem.yaml's redact section", ErrRedaction, what, err)
	}
	// A file or key of the operator's, outside what the session may read:
	// its path, and a parse error's line, key or character, are the
	// operator's to see, not the agent's.
	if r.Log != nil {
		r.Log.Error("a session could not start: its redact settings cannot be used", "tenant", tenant, "target", target, "err", err)
	}
	return redaction{}, fmt.Errorf("%w: %s: a secret file or key that tandem.yaml's redact section names cannot be used; tandem's log says which and why. Ask the operator to fix it", ErrRedaction, what)
}

// buildRedaction is redactionFor without the error's advice.
func (r *Resolver) buildRedaction(tenant, target, dir string, inWorkspace bool, held []redact.Literal) (redaction, error) {
	rc := r.Config.RedactFor(tenant, target)
	c := redact.Config{Env: rc.Env, Patterns: rc.Patterns, Entropy: rc.Entropy != nil && *rc.Entropy}
	o := redact.Options{Home: r.Home, Environ: os.Environ(), Literals: held}
	if inWorkspace {
		// The agent may write the workspace: its files are read beneath it.
		o.Root = dir
	} else {
		o.Base = dir
	}
	c.SecretFiles = rc.SecretFiles
	if c.Patterns != nil && !*c.Patterns && !c.Entropy && len(c.SecretFiles) == 0 && len(c.Env) == 0 && len(held) == 0 {
		return redaction{}, nil
	}
	red, err := redact.New(c, o)
	if err != nil {
		return redaction{}, err
	}
	x := redaction{redactor: red, viewers: rc.Viewers != nil && *rc.Viewers}
	if rc.RawKey != "" {
		k, err := seal.ReadKey(rc.RawKey)
		if err != nil {
			return redaction{}, fmt.Errorf("redact.rawKey: %w", err)
		}
		x.rawKey = &k
	}
	return x, nil
}

// redaction is what a target's redact settings give a session.
type redaction struct {
	redactor *redact.Redactor
	viewers  bool
	rawKey   *seal.Key
}

// apply sets the session target's redaction fields.
func (x redaction) apply(t *session.Target) {
	t.Redact, t.RedactViewers, t.RawKey = x.redactor, x.viewers, x.rawKey
}

// heldRedactor redacts the credentials tandem adds for a session (held)
// from what every human and record sees, whatever redact.viewers says
// (session.Target.RedactHeld): those values only, no patterns. Nil when
// there are none.
func heldRedactor(held []redact.Literal) (*redact.Redactor, error) {
	if len(held) == 0 {
		return nil, nil
	}
	off := false
	red, err := redact.New(redact.Config{Patterns: &off}, redact.Options{Literals: held})
	if err != nil {
		return nil, fmt.Errorf("redact held credentials: %w", err)
	}
	return red, nil
}

// sshSecrets are the credentials tandem holds for an ssh connection.
func sshSecrets(o *sshconn.Options) []redact.Literal {
	var l []redact.Literal
	if o.Password != "" {
		l = append(l, redact.Literal{Value: o.Password, Kind: "ssh-password"})
	}
	if o.Passphrase != "" {
		l = append(l, redact.Literal{Value: o.Passphrase, Kind: "ssh-passphrase"})
	}
	if len(o.PrivateKey) > 0 {
		l = append(l, redact.Literal{Value: string(o.PrivateKey), Kind: "ssh-key"})
	}
	return l
}
