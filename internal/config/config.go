// Package config loads and validates tandem.yaml: the targets agents may
// connect to, lease and output limits, and what callers may do ad hoc.
// Every error names the file, the key and the reason, so a bad config fails
// at start instead of at the first call. It reads files only; it knows
// nothing of shells, sessions or MCP.
package config

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/egress"
	"github.com/tandem-sh/tandem/internal/seal"
	"go.yaml.in/yaml/v3"
)

// Config is a validated tandem.yaml.
type Config struct {
	// Targets are the places a session may run, by name.
	Targets []Target `yaml:"targets"`
	// Limits bound sessions and commands.
	Limits Limits `yaml:"limits"`
	// AllowAdHoc lets ssh_connect take host parameters instead of a target
	// name. Nil means the default: allowed over stdio.
	AllowAdHoc *bool `yaml:"allowAdHoc"`
	// Web configures the browser terminal's listener.
	Web Web `yaml:"web"`
	// Audit says what happens when the audit log cannot be written.
	Audit Audit `yaml:"audit"`
	// Tenants are the teams an HTTP-mode server serves, each with its own
	// targets and workspaces. Without it, the top-level targets form one
	// tenant named "default" with one workspace named "default".
	Tenants []Tenant `yaml:"tenants"`
	// Auth says which bearer claims HTTP mode accepts.
	Auth Auth `yaml:"auth"`
	// Policy decides what agents may run unwatched (stdio mode and the
	// default tenant); tenants and targets may set their own.
	Policy *Policy `yaml:"policy"`
	// Approvals bound how long calls wait for a human.
	Approvals Approvals `yaml:"approvals"`
	// Redact says which secrets are kept out of what agents read; tenants
	// and targets add their own (see RedactFor).
	Redact *Redact `yaml:"redact"`
	// base is the directory relative paths of the file resolve against.
	base string
	// Cluster joins the nodes that share one PostgreSQL store (--store),
	// so that any node serves any session's calls.
	Cluster Cluster `yaml:"cluster"`
}

// Cluster configures the channel between nodes sharing a store: each node
// forwards a call to the node holding its session, signed with the
// secret, and the owner checks the caller's claim again.
type Cluster struct {
	// Secret or SecretFile holds the secret every node of the cluster
	// shares, at least 32 bytes (e.g. openssl rand -hex 32); a file keeps
	// it out of the config.
	Secret     string `yaml:"secret"`
	SecretFile string `yaml:"secretFile"`
	// URL is how the other nodes reach this one, such as
	// https://10.0.0.5:8443; default the --http listener's address.
	// --advertise-url sets it per node.
	URL string `yaml:"url"`
	// CAFile, if set, holds the CA certificates (PEM) that the other
	// nodes' TLS certificates are checked against, instead of the system's.
	CAFile string `yaml:"caFile"`
}

// On reports whether a cluster secret is configured.
func (c Cluster) On() bool { return c.Secret != "" || c.SecretFile != "" }

// Policy is a mode and rules: what runs, what waits for a human, what never
// runs. The most specific policy applies whole: a target's, else its
// tenant's, else the top-level one; none means mode allow.
type Policy struct {
	// Mode applies when no rule matches: allow (yes), deny (no), ask or forward.
	Mode string `yaml:"mode"`
	// Rules match by tool and, for command tools, by command pattern; the
	// strictest matching decision wins.
	Rules []Rule `yaml:"rules"`
	// Approvers answer ask: dashboard and/or client. Default [dashboard,
	// client] over stdio, [dashboard] in HTTP mode.
	Approvers []string `yaml:"approvers"`
	// Forward names the upstream approver of the forward decision.
	Forward *Forward `yaml:"forward"`
}

// Forward is an upstream approver: another tandem's POST /api/approvals,
// or anything that answers like it.
type Forward struct {
	URL string `yaml:"url"`
	// Token or TokenFile holds the bearer token (the upstream's operator
	// token); a file keeps it out of the config.
	Token     string `yaml:"token"`
	TokenFile string `yaml:"tokenFile"`
	// CAFile, if set, holds the CA certificates (PEM) that an https
	// upstream's certificate is checked against, instead of the system's.
	CAFile string `yaml:"caFile"`
}

// Rule is one policy rule.
type Rule struct {
	Tool    string `yaml:"tool"`
	Command string `yaml:"command"`
	// Path is a glob over the path a file tool (ssh_upload, ssh_download)
	// reads or writes, relative to the workspace: ".git/**", "*.pem".
	Path     string `yaml:"path"`
	Decision string `yaml:"decision"`
}

// Approvals bound the waits for a human's answer.
type Approvals struct {
	// WaitSeconds: how long a call waits before answering approval_pending
	// (default 50, under common clients' 60 s request timeout).
	WaitSeconds int `yaml:"waitSeconds"`
	// TimeoutSeconds: when an unanswered approval is denied (default 300).
	TimeoutSeconds int `yaml:"timeoutSeconds"`
	// MaxRememberMinutes caps "approve and remember" (default 60).
	MaxRememberMinutes int `yaml:"maxRememberMinutes"`
}

// Tenant is one team: the targets its agents may reach and the workspaces
// that group them. Targets and their paths, hosts and credentials never
// leave the server; an agent names a target only.
type Tenant struct {
	Name    string   `yaml:"name"`
	Targets []Target `yaml:"targets"`
	// Workspaces name sets of the tenant's targets; a claim's wsp picks one.
	Workspaces []Workspace `yaml:"workspaces"`
	// AllowAdHoc lets this tenant's agents pass host parameters to
	// ssh_connect in HTTP mode; default off.
	AllowAdHoc bool `yaml:"allowAdHoc"`
	// Policy applies to the tenant's targets without their own.
	Policy *Policy `yaml:"policy"`
	// Redact adds to the top-level redact section for the tenant's targets.
	Redact *Redact `yaml:"redact"`
}

// Workspace is a named set of a tenant's targets.
type Workspace struct {
	Name    string   `yaml:"name"`
	Targets []string `yaml:"targets"`
}

// Auth configures bearer claims (HTTP mode).
type Auth struct {
	// Audience is the aud every token must carry (RFC 8707: a token minted
	// for another server is refused). Default "tandem"; set it to the
	// server's public MCP URL when several servers share issuers.
	Audience string `yaml:"audience"`
	// Issuer is the iss of tandem's own tokens; default "tandem".
	Issuer string `yaml:"issuer"`
	// MaxTTL is the longest a token may live (exp - iat); default 24h.
	MaxTTL Duration `yaml:"maxTTL"`
	// Issuers are external identity providers whose tokens are accepted.
	Issuers []Issuer `yaml:"issuers"`
	// SigningKey is the file of tandem's own Ed25519 signing key (PKCS#8
	// PEM, mode 0600); default claim.key in the data dir. The nodes of a
	// cluster share one, so that a token any of them issued is good on all.
	SigningKey string `yaml:"signingKey"`
}

// Issuer is an external identity provider.
type Issuer struct {
	Issuer string `yaml:"issuer"`
	// JWKSURL is where its public keys are fetched; or PublicKeys holds
	// them as PEM ("-----BEGIN PUBLIC KEY-----").
	JWKSURL    string   `yaml:"jwksUrl"`
	PublicKeys []string `yaml:"publicKeys"`
	// Audience is the aud its tokens must carry for this server.
	Audience string `yaml:"audience"`
	// Claims maps tandem's claim fields to the provider's claim names.
	Claims ClaimNames `yaml:"claims"`
}

// ClaimNames maps claim fields to names; empty fields keep tandem's names
// (tnt, sub, wsp, tools, sid).
type ClaimNames struct {
	Tenant    string `yaml:"tenant"`
	Actor     string `yaml:"actor"`
	Workspace string `yaml:"workspace"`
	Tools     string `yaml:"tools"`
	SID       string `yaml:"sid"`
}

// DefaultTenant names the tenant that the top-level targets form, and the
// one stdio mode serves.
const DefaultTenant = "default"

// Web configures the browser terminal.
type Web struct {
	// PublicHosts are the names (besides loopback ones) that browsers may
	// use to reach the terminal, e.g. a reverse proxy's. Requests naming any
	// other host are refused.
	PublicHosts []string `yaml:"publicHosts"`
	// OperatorTokenFile, if set, holds the operator token of the dashboard
	// (instead of dashboard.token in the data dir): the nodes of a cluster
	// behind one balancer share it, so one sign-in works on every node.
	OperatorTokenFile string `yaml:"operatorTokenFile"`
}

// The values of audit.onFailure.
const (
	AuditRefuse   = "refuse"
	AuditContinue = "continue"
)

// Audit configures the audit log.
type Audit struct {
	// OnFailure is "refuse" (the default: a call whose audit record cannot
	// be written runs nothing and answers audit_unavailable) or "continue"
	// (the call runs and its reply carries auditError).
	OnFailure string `yaml:"onFailure"`
}

// Target is one configured place to run a shell.
type Target struct {
	Name string `yaml:"name"`
	// Kind is "local" (a sandboxed shell on this machine) or "ssh".
	Kind string `yaml:"kind"`

	// Workspace is the local target's read-write directory.
	Workspace string `yaml:"workspace"`
	// Network is a local target's network access: off (the default), on,
	// or an allowlist served by tandem's egress proxy.
	Network Network `yaml:"network"`
	// Sandbox is "landlock" (the default) or "none" for a local target.
	Sandbox string `yaml:"sandbox"`
	// ReadOnly adds files and directories a sandboxed local session may
	// read to the default system set: e.g. ~/.bashrc and the tool
	// directories it sets up, so the user's own rc file loads.
	ReadOnly []string `yaml:"readOnly"`
	// UnixSockets lists pathname unix sockets (or directories of them)
	// outside the workspace that a sandboxed local session may connect
	// to, e.g. a database's socket: every other one outside the workspace
	// and the session's private directories is refused. Absolute paths.
	UnixSockets []string `yaml:"unixSockets"`

	Host          string `yaml:"host"`
	Port          int    `yaml:"port"`
	User          string `yaml:"user"`
	KeyFile       string `yaml:"keyFile"`
	UseAgent      bool   `yaml:"useAgent"`
	KnownHosts    string `yaml:"knownHosts"`
	HostKeyPolicy string `yaml:"hostKeyPolicy"`
	// PasswordFile holds the ssh target's password, read by the server at
	// connect time (never in tandem.yaml, never shown to an agent).
	PasswordFile string `yaml:"passwordFile"`
	// Policy applies to sessions on this target.
	Policy *Policy `yaml:"policy"`
	// Redact adds to the tenant's and the top-level redact sections.
	Redact *Redact `yaml:"redact"`
}

// Redact is a redact section: which secrets tandem replaces with markers
// in everything an agent reads (replies, read-backs, resources, progress,
// gate reports) and, by choice, in what viewers and recordings see. The
// sections of the top level, the tenant and the target combine: files and
// variable names add up, and for the switches the most specific one set
// wins.
type Redact struct {
	// SecretFiles are dotenv, INI or JSON files whose values are secrets.
	// A relative path is read in a local target's workspace (the
	// project's .env); for an ssh target, beside tandem.yaml; where it is
	// missing it holds no secrets until it appears. A missing absolute or
	// "~/" path refuses the target's sessions.
	SecretFiles []string `yaml:"secretFiles"`
	// Env names environment variables of the tandem process whose values
	// are secrets.
	Env []string `yaml:"env"`
	// Patterns turns the built-in token patterns off with false; on by
	// default.
	Patterns *bool `yaml:"patterns"`
	// Entropy also redacts long random-looking strings; off by default.
	Entropy *bool `yaml:"entropy"`
	// Viewers redacts what the browser terminal, tandem attach and the
	// recording (and so the replay) show too; off by default, so the
	// operator's record keeps the exact bytes.
	Viewers *bool `yaml:"viewers"`
	// RawKey is a file with an operator's public key (tandem audit
	// raw-keys): the exact bytes of every stream that had secrets
	// redacted are kept sealed to it, for tandem audit raw.
	RawKey string `yaml:"rawKey"`
}

// RedactFor combines the redact sections that apply to a tenant's target
// (name "" for ad-hoc parameters): the top level's, the tenant's and the
// target's. SecretFiles keep relative paths as written; BaseDir says what
// they mean for an ssh target.
func (c *Config) RedactFor(tenant, target string) Redact {
	var out Redact
	add := func(r *Redact) {
		if r == nil {
			return
		}
		out.SecretFiles = append(out.SecretFiles, r.SecretFiles...)
		out.Env = append(out.Env, r.Env...)
		for _, b := range [][2]**bool{{&out.Patterns, &r.Patterns}, {&out.Entropy, &r.Entropy}, {&out.Viewers, &r.Viewers}} {
			if *b[1] != nil {
				*b[0] = *b[1]
			}
		}
		if r.RawKey != "" {
			out.RawKey = r.RawKey
		}
	}
	add(c.Redact)
	if tn, ok := c.Tenant(tenant); ok {
		if len(c.Tenants) > 0 {
			add(tn.Redact)
		}
		if t, ok := tn.Target(target); ok && target != "" {
			add(t.Redact)
		}
	}
	out.SecretFiles = slices.Compact(out.SecretFiles)
	return out
}

// BaseDir is the directory of tandem.yaml, against which an ssh target's
// relative secret files are read; tandem's working directory without a
// file.
func (c *Config) BaseDir() string { return c.base }

// Limits are the lease and command bounds.
type Limits struct {
	IdleTimeout       Duration `yaml:"idleTimeout"`
	MaxLifetime       Duration `yaml:"maxLifetime"`
	CommandTimeout    Duration `yaml:"commandTimeout"`
	KeepaliveInterval Duration `yaml:"keepaliveInterval"`
	// InlineOutput is limits.inlineOutputBytes as written: nil when the
	// file leaves it out, so an explicit 0 (no bound) stays distinct.
	InlineOutput *int `yaml:"inlineOutputBytes"`
	// InlineOutputBytes bounds the JSON size of all output inline in one
	// reply (default DefaultInlineOutputBytes); 0 means no bound.
	InlineOutputBytes int `yaml:"-"`
	// KeptOutputBytes bounds the disk one session's command outputs take
	// for read-back (default DefaultKeptOutputBytes): past it the oldest
	// are removed, and one stream keeps at most half of it. A byte bound,
	// not a count, so no paste can push out what the agent was not told of.
	KeptOutputBytes int64 `yaml:"keptOutputBytes"`
	// RecordingBytes bounds the terminal output and input one session's
	// recording keeps (default DefaultRecordingBytes); past it the cast
	// says so and keeps only markers and resizes.
	RecordingBytes int64 `yaml:"recordingBytes"`
	// UploadBytes and DownloadBytes bound one file moved by ssh_upload or
	// ssh_download (and the monitoring page's uploads and downloads):
	// default DefaultTransferBytes each.
	UploadBytes   int64 `yaml:"uploadBytes"`
	DownloadBytes int64 `yaml:"downloadBytes"`
}

// DefaultTransferBytes is limits.uploadBytes and limits.downloadBytes
// when tandem.yaml leaves them out: 50 MiB, a release archive or a video
// capture, while a base64 upload of it stays one JSON message of ~67 MB.
const DefaultTransferBytes = 50 << 20

// MaxTransferBytes caps both: an upload is one JSON message, held whole
// in memory while it is decoded.
const MaxTransferBytes = 1 << 30

// DefaultRecordingBytes is limits.recordingBytes when tandem.yaml leaves
// it out: 4 GiB of a session's terminal in its recording.
const DefaultRecordingBytes = 4 << 30

// DefaultKeptOutputBytes is limits.keptOutputBytes when tandem.yaml
// leaves it out: a session's outputs on disk, 1 GiB.
const DefaultKeptOutputBytes = 1 << 30

// MinKeptOutputBytes is the least limits.keptOutputBytes (and
// limits.recordingBytes) accepted.
const MinKeptOutputBytes = 1 << 20

// DefaultInlineOutputBytes is the inline output budget of one reply. It
// sits well under what agent clients keep of a tool result (Claude Code
// about 25,000 tokens, Codex about 10 KiB); the rest is one ssh_read_output
// call away.
const DefaultInlineOutputBytes = 32 << 10

// DefaultCommandTimeout is ssh_exec's timeout when the call names none. It
// sits under the 60 s request timeout of the common MCP clients (the
// TypeScript SDK's default), so a long command answers command_timeout
// with its commandId before the client gives up on the call.
const DefaultCommandTimeout = 50 * time.Second

// Network is a local target's network access. In tandem.yaml it is
// false, true, or a mapping with allow (and ask, hosts): the session's
// programs then reach the network only through tandem's egress proxy,
// which lets through the hosts allow lists.
type Network struct {
	// On is network: true, every connection allowed.
	On bool `yaml:"-"`
	// Allow lists the hosts, addresses and presets the proxy lets
	// through (egress.ParseEntries): a string, or a mapping {host,
	// methods, paths} whose requests the proxy judges one by one.
	Allow []AllowEntry `yaml:"allow"`
	// Ask holds a connection to an unlisted host until someone decides,
	// instead of refusing it: true asks this tandem's approvers, forward
	// the policy's upstream approver.
	Ask Ask `yaml:"ask"`
	// Hosts answers for these names without DNS, as /etc/hosts would
	// (e.g. an internal registry); the address is still judged.
	Hosts map[string]string `yaml:"hosts"`
	// Credentials are added by the proxy to the requests sent to their
	// hosts, so the secret never enters the session.
	Credentials []Credential `yaml:"credentials"`
}

// AllowEntry is one network.allow entry: "host[:port]" or a mapping
// {host, methods, paths}.
type AllowEntry struct {
	Host    string   `yaml:"host"`
	Methods []string `yaml:"methods"`
	Paths   []string `yaml:"paths"`
}

// UnmarshalYAML reads a string or a mapping.
func (e *AllowEntry) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		*e = AllowEntry{Host: node.Value}
		return nil
	}
	type plain AllowEntry
	var p plain
	if err := node.Decode(&p); err != nil {
		return fmt.Errorf("line %d: a network.allow entry is \"host[:port]\" or {host, methods, paths}: %w", node.Line, err)
	}
	*e = AllowEntry(p)
	return nil
}

// Egress is the entry as the egress proxy reads it.
func (e AllowEntry) Egress() egress.Entry {
	return egress.Entry{Host: e.Host, Methods: e.Methods, Paths: e.Paths}
}

// AllowEntries converts network.allow for egress.ParseEntries.
func (n Network) AllowEntries() []egress.Entry {
	out := make([]egress.Entry, len(n.Allow))
	for i, e := range n.Allow {
		out[i] = e.Egress()
	}
	return out
}

// Credential is one network.credentials entry: what tandem's egress
// proxy adds to each request to Host (under Path), on a connection it
// inspects. The secret comes from a file of the operator's or tandem's
// own environment, never from the session.
type Credential struct {
	// Name names it in audit records and replies (never its value).
	Name string `yaml:"name"`
	// Host is an allowlist entry ("api.example.com", "*.forge.test:443").
	Host string `yaml:"host"`
	// Path limits it to requests whose path starts with it.
	Path string `yaml:"path"`
	// Header is the header's name (default Authorization).
	Header string `yaml:"header"`
	// Value is the header's value: {secret} stands for the secret, and
	// {USER:secret} for the base64 of USER:secret (Basic auth).
	Value string `yaml:"value"`
	// SecretFile or SecretEnv holds the secret (one of them).
	SecretFile string `yaml:"secretFile"`
	SecretEnv  string `yaml:"secretEnv"`
	// Replace overwrites a header the request brings instead of
	// refusing the request.
	Replace bool `yaml:"replace"`
	// CAFile verifies the host's certificate instead of the system's roots.
	CAFile string `yaml:"caFile"`
}

// Proxied reports whether the target's network goes through tandem's
// egress proxy.
func (n Network) Proxied() bool {
	return !n.On && (len(n.Allow) > 0 || n.Ask != AskNo || len(n.Credentials) > 0)
}

// Ask is network.ask: who decides a connection to a host the allowlist
// does not list.
type Ask int

// The values of network.ask.
const (
	// AskNo refuses an unlisted host (ask: false, the default).
	AskNo Ask = iota
	// AskHere holds it for this tandem's approvers (ask: true): the
	// dashboard, the monitoring page, and the agent's client where the
	// policy's approvers include it.
	AskHere
	// AskForward holds it for the policy's forward upstream (ask:
	// forward); this tandem's dashboard may answer first.
	AskForward
)

// UnmarshalYAML reads ask: true, false or forward.
func (a *Ask) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode && node.Value == "forward" {
		*a = AskForward
		return nil
	}
	var on bool
	if err := node.Decode(&on); err != nil {
		return fmt.Errorf("line %d: network.ask is true, false or forward", node.Line)
	}
	*a = map[bool]Ask{false: AskNo, true: AskHere}[on]
	return nil
}

// UnmarshalYAML reads network: true, false or a mapping.
func (n *Network) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		var on bool
		if err := node.Decode(&on); err != nil {
			return fmt.Errorf("line %d: network is true, false, or a mapping with allow (and ask, hosts)", node.Line)
		}
		*n = Network{On: on}
		return nil
	}
	type plain Network
	var p plain
	if err := node.Decode(&p); err != nil {
		return err
	}
	*n = Network(p)
	return nil
}

// Duration is a time.Duration written as "30s", "15m" or "12h".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration like 30s, 15m or 12h", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Default is the embedded configuration used when no file is given: one
// sandboxed local target named "local" rooted at dir.
func Default(dir string) *Config {
	c := &Config{Targets: []Target{{Name: "local", Kind: "local", Workspace: dir}}, base: dir}
	c.fill()
	return c
}

// Load reads and validates the file at path. Relative workspace and key
// paths are resolved against the file's directory; "~/" against home.
func Load(path, home string) (*Config, error) {
	return LoadWorkspace(path, home, "")
}

// LoadWorkspace is Load with the workspace of the file's one local target
// set to dir (tandem serve --config FILE --workspace DIR): the same file
// then serves several projects, each client naming its own. A file with
// no local target, or with more than one, is refused, saying which flag
// to drop. dir "" leaves the file as written.
func LoadWorkspace(path, home, dir string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parse(b, filepath.Dir(path), home, dir)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates YAML; base and home resolve relative paths.
func Parse(b []byte, base, home string) (*Config, error) {
	return parse(b, base, home, "")
}

// setWorkspace points the one local target at dir (see LoadWorkspace).
func (c *Config) setWorkspace(dir string) error {
	var locals []*Target
	var names []string
	for i := range c.Targets {
		if c.Targets[i].Kind == "local" {
			locals = append(locals, &c.Targets[i])
			names = append(names, c.Targets[i].Name)
		}
	}
	for i := range c.Tenants {
		for j := range c.Tenants[i].Targets {
			if t := &c.Tenants[i].Targets[j]; t.Kind == "local" {
				locals = append(locals, t)
				names = append(names, c.Tenants[i].Name+"/"+t.Name)
			}
		}
	}
	switch len(locals) {
	case 1:
		locals[0].Workspace = dir
		return nil
	case 0:
		return errors.New("--workspace names the workspace of the file's local target, and this file has none: drop --workspace, or add a target with kind: local")
	}
	return fmt.Errorf("--workspace names the workspace of the file's one local target, and this file has %d (%s): drop --workspace and set workspace on each of them in the file",
		len(locals), strings.Join(names, ", "))
}

func parse(b []byte, base, home, workspace string) (*Config, error) {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	// Every mistake comes in one run: those of shape are cut out of the
	// tree, and the rest is decoded and validated all the same, except
	// where a shape mistake already speaks of the key.
	shapeErrs, pruned, ok := checkShape(&root)
	if !ok {
		return nil, errors.Join(shapeErrs...)
	}
	var c Config
	if len(shapeErrs) == 0 {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
	} else if err := root.Decode(&c); err != nil {
		return nil, errors.Join(shapeErrs...)
	}
	c.fill()
	c.base = base
	if workspace != "" {
		if err := c.setWorkspace(workspace); err != nil {
			return nil, errors.Join(append(shapeErrs, err)...)
		}
	}
	if err := c.validate(base, home, pruned); err != nil {
		return nil, errors.Join(append(shapeErrs, err)...)
	}
	if len(shapeErrs) > 0 {
		return nil, errors.Join(shapeErrs...)
	}
	return &c, nil
}

func (c *Config) fill() {
	l := &c.Limits
	if l.IdleTimeout == 0 {
		l.IdleTimeout = Duration(30 * time.Minute)
	}
	if l.MaxLifetime == 0 {
		l.MaxLifetime = Duration(12 * time.Hour)
	}
	if l.CommandTimeout == 0 {
		l.CommandTimeout = Duration(DefaultCommandTimeout)
	}
	if l.KeepaliveInterval == 0 {
		l.KeepaliveInterval = Duration(5 * time.Second)
	}
	if l.KeptOutputBytes == 0 {
		l.KeptOutputBytes = DefaultKeptOutputBytes
	}
	if l.RecordingBytes == 0 {
		l.RecordingBytes = DefaultRecordingBytes
	}
	if l.UploadBytes == 0 {
		l.UploadBytes = DefaultTransferBytes
	}
	if l.DownloadBytes == 0 {
		l.DownloadBytes = DefaultTransferBytes
	}
	l.InlineOutputBytes = DefaultInlineOutputBytes
	if l.InlineOutput != nil {
		l.InlineOutputBytes = *l.InlineOutput
	}
	if c.Audit.OnFailure == "" {
		c.Audit.OnFailure = AuditRefuse
	}
	if c.Auth.Audience == "" {
		c.Auth.Audience = "tandem"
	}
	if c.Auth.Issuer == "" {
		c.Auth.Issuer = "tandem"
	}
	if c.Auth.MaxTTL == 0 {
		c.Auth.MaxTTL = Duration(24 * time.Hour)
	}
	a := &c.Approvals
	if a.WaitSeconds == 0 {
		a.WaitSeconds = 50
	}
	if a.TimeoutSeconds == 0 {
		a.TimeoutSeconds = 300
	}
	if a.MaxRememberMinutes == 0 {
		a.MaxRememberMinutes = 60
	}
	fillTargets(c.Targets)
	for i := range c.Tenants {
		fillTargets(c.Tenants[i].Targets)
	}
}

func fillTargets(ts []Target) {
	for i := range ts {
		t := &ts[i]
		if t.Kind == "ssh" && t.Port == 0 {
			t.Port = 22
		}
		if t.Kind == "ssh" && t.HostKeyPolicy == "" {
			t.HostKeyPolicy = "accept-new"
		}
		if t.Kind == "local" && t.Sandbox == "" {
			t.Sandbox = "landlock"
		}
	}
}

// validate checks what the YAML's shape cannot say. A key under one of
// skip (cut out for a mistake already reported) is not judged again.
func (c *Config) validate(base, home string, skip []string) error {
	var errs []error
	bad := func(key, format string, a ...any) {
		for _, p := range skip {
			if key == p || strings.HasPrefix(key, p+".") || strings.HasPrefix(key, p+"[") {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	validateTargets("targets", c.Targets, base, home, bad)
	c.validateTenants(base, home, bad)
	c.validateAuth(bad)
	squat := c.loopbackSquatter()
	validatePolicy("policy", c.Policy, base, home, squat, bad)
	for i, t := range c.Targets {
		validatePolicy(fmt.Sprintf("targets[%d].policy", i), t.Policy, base, home, squat, bad)
	}
	for i, tn := range c.Tenants {
		validatePolicy(fmt.Sprintf("tenants[%d].policy", i), tn.Policy, base, home, squat, bad)
		for j, t := range tn.Targets {
			validatePolicy(fmt.Sprintf("tenants[%d].targets[%d].policy", i, j), t.Policy, base, home, squat, bad)
		}
	}
	c.validateAskForward(bad)
	if a := c.Approvals; a.WaitSeconds < 0 || a.TimeoutSeconds < 0 || a.MaxRememberMinutes < 0 || a.WaitSeconds > a.TimeoutSeconds {
		bad("approvals", "waitSeconds, timeoutSeconds and maxRememberMinutes must be positive, and waitSeconds at most timeoutSeconds")
	}
	l := c.Limits
	if l.IdleTimeout < 0 || l.MaxLifetime < 0 || l.CommandTimeout < 0 || l.KeepaliveInterval < 0 {
		bad("limits", "durations must be positive")
	}
	if l.InlineOutputBytes != 0 && l.InlineOutputBytes < 1024 {
		bad("limits.inlineOutputBytes", "must be 0 (no bound) or at least 1024, got %d", l.InlineOutputBytes)
	}
	if l.KeptOutputBytes < MinKeptOutputBytes {
		bad("limits.keptOutputBytes", "must be at least %d (1 MiB), got %d", MinKeptOutputBytes, l.KeptOutputBytes)
	}
	if l.RecordingBytes < MinKeptOutputBytes {
		bad("limits.recordingBytes", "must be at least %d (1 MiB), got %d", MinKeptOutputBytes, l.RecordingBytes)
	}
	for _, b := range []struct {
		key string
		n   int64
	}{{"limits.uploadBytes", l.UploadBytes}, {"limits.downloadBytes", l.DownloadBytes}} {
		if b.n < 1 || b.n > MaxTransferBytes {
			bad(b.key, "must be between 1 and %d (1 GiB), got %d", int64(MaxTransferBytes), b.n)
		}
	}
	if c.Audit.OnFailure != AuditRefuse && c.Audit.OnFailure != AuditContinue {
		bad("audit.onFailure", "must be refuse or continue, got %q", c.Audit.OnFailure)
	}
	c.validateCluster(base, home, bad)
	validateRedact("redact", c.Redact, base, home, bad)
	for i, t := range c.Targets {
		validateRedact(fmt.Sprintf("targets[%d].redact", i), t.Redact, base, home, bad)
	}
	for i, tn := range c.Tenants {
		validateRedact(fmt.Sprintf("tenants[%d].redact", i), tn.Redact, base, home, bad)
		for j, t := range tn.Targets {
			validateRedact(fmt.Sprintf("tenants[%d].targets[%d].redact", i, j), t.Redact, base, home, bad)
		}
	}
	if c.Web.OperatorTokenFile != "" {
		c.Web.OperatorTokenFile = resolve(c.Web.OperatorTokenFile, base, home)
	}
	if c.Auth.SigningKey != "" {
		c.Auth.SigningKey = resolve(c.Auth.SigningKey, base, home)
	}
	for i, h := range c.Web.PublicHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			bad(fmt.Sprintf("web.publicHosts[%d]", i), "must be a bare host name, got %q", h)
		}
	}
	return errors.Join(errs...)
}

// validateCluster checks the cluster block and resolves its paths.
func (c *Config) validateCluster(base, home string, bad func(key, format string, a ...any)) {
	cl := &c.Cluster
	if cl.Secret != "" && cl.SecretFile != "" {
		bad("cluster", "set secret or secretFile, not both")
	}
	if cl.Secret != "" && len(cl.Secret) < 32 {
		bad("cluster.secret", "must be at least 32 characters (e.g. openssl rand -hex 32)")
	}
	if cl.SecretFile != "" {
		cl.SecretFile = resolve(cl.SecretFile, base, home)
	}
	if cl.CAFile != "" {
		cl.CAFile = resolve(cl.CAFile, base, home)
	}
	if cl.URL != "" {
		if u, err := url.Parse(cl.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
			bad("cluster.url", "must be http(s)://host:port of this node, got %q", cl.URL)
		}
	}
	if !cl.On() && (cl.URL != "" || cl.CAFile != "") {
		bad("cluster", "url and caFile need secret or secretFile")
	}
}

// validateTargets checks one list of targets (top-level or a tenant's) and
// resolves their paths; prefix is the list's key for messages.
func validateTargets(prefix string, ts []Target, base, home string, bad func(key, format string, a ...any)) {
	seen := map[string]bool{}
	for i := range ts {
		t := &ts[i]
		k := fmt.Sprintf("%s[%d]", prefix, i)
		switch {
		case t.Name == "":
			bad(k+".name", "is required")
		case seen[t.Name]:
			bad(k+".name", "%q is used by an earlier target", t.Name)
		}
		seen[t.Name] = true
		switch t.Kind {
		case "local":
			if t.Workspace == "" {
				bad(k+".workspace", "is required for a local target")
				continue
			}
			t.Workspace = resolve(t.Workspace, base, home)
			if fi, err := os.Stat(t.Workspace); err != nil || !fi.IsDir() {
				bad(k+".workspace", "%q is not an existing directory", t.Workspace)
			}
			if t.Sandbox != "landlock" && t.Sandbox != "none" {
				bad(k+".sandbox", "must be landlock or none, got %q", t.Sandbox)
			}
			if t.Network.Proxied() {
				if t.Sandbox == "none" {
					bad(k+".network", "an allowlist needs the sandbox: without it the shell could connect anywhere (remove sandbox: none, or set network: true)")
				}
				if _, err := egress.ParseEntries(t.Network.AllowEntries()); err != nil {
					bad(k+".network.allow", "%v", err)
				}
				checkCredentials(k+".network.credentials", t.Network.Credentials, base, home, bad)
				for name, addr := range t.Network.Hosts {
					if _, err := netip.ParseAddr(addr); err != nil {
						bad(k+".network.hosts."+name, "%q is not an IP address", addr)
					}
				}
			} else if len(t.Network.Hosts) > 0 {
				bad(k+".network.hosts", "applies with an allowlist only (network.allow)")
			}
			for j, p := range t.ReadOnly {
				t.ReadOnly[j] = resolve(p, base, home)
				if _, err := os.Stat(t.ReadOnly[j]); err != nil {
					bad(fmt.Sprintf("%s.readOnly[%d]", k, j), "%q does not exist", t.ReadOnly[j])
				}
			}
			for j, p := range t.UnixSockets {
				switch {
				case !filepath.IsAbs(p):
					bad(fmt.Sprintf("%s.unixSockets[%d]", k, j), "%q is not an absolute path", p)
				case t.Sandbox == "none":
					bad(fmt.Sprintf("%s.unixSockets[%d]", k, j), "applies with the sandbox only: with sandbox: none every socket is reachable")
				default:
					t.UnixSockets[j] = filepath.Clean(p)
				}
			}
		case "ssh":
			if len(t.UnixSockets) > 0 {
				bad(k+".unixSockets", "applies to local targets only")
			}
			if t.Network.On || t.Network.Proxied() {
				bad(k+".network", "applies to local targets only: tandem cannot confine a remote host's network")
			}
			if t.Host == "" {
				bad(k+".host", "is required for an ssh target")
			}
			if t.User == "" {
				bad(k+".user", "is required for an ssh target")
			}
			if t.Port < 1 || t.Port > 65535 {
				bad(k+".port", "must be 1-65535, got %d", t.Port)
			}
			if t.KeyFile == "" && !t.UseAgent && t.PasswordFile == "" {
				bad(k, "needs keyFile, useAgent: true or passwordFile (passwords are not written in tandem.yaml)")
			}
			if t.PasswordFile != "" {
				t.PasswordFile = resolve(t.PasswordFile, base, home)
				if err := readableFile(t.PasswordFile); err != nil {
					bad(k+".passwordFile", "%v", err)
				}
			}
			if t.KeyFile != "" {
				t.KeyFile = resolve(t.KeyFile, base, home)
				if err := readableFile(t.KeyFile); err != nil {
					bad(k+".keyFile", "%v", err)
				}
			}
			if t.KnownHosts != "" {
				t.KnownHosts = resolve(t.KnownHosts, base, home)
				if err := knownHostsOK(t.KnownHosts, t.HostKeyPolicy); err != nil {
					bad(k+".knownHosts", "%v", err)
				}
			}
			if t.HostKeyPolicy != "strict" && t.HostKeyPolicy != "accept-new" {
				bad(k+".hostKeyPolicy", "must be strict or accept-new, got %q", t.HostKeyPolicy)
			}
		default:
			bad(k+".kind", "must be local or ssh, got %q", t.Kind)
		}
	}
}

func (c *Config) validateTenants(base, home string, bad func(key, format string, a ...any)) {
	if len(c.Tenants) > 0 && len(c.Targets) > 0 {
		bad("targets", "cannot be used with tenants; move each target under its tenant's targets")
	}
	seen := map[string]bool{}
	type owned struct{ tenant, key, path, real string }
	var locals []owned
	for i := range c.Tenants {
		tn := &c.Tenants[i]
		k := fmt.Sprintf("tenants[%d]", i)
		switch {
		case tn.Name == "":
			bad(k+".name", "is required")
		case !nameOK(tn.Name):
			bad(k+".name", "%q must be letters, digits, '.', '_' or '-' (at most 64)", tn.Name)
		case seen[tn.Name]:
			bad(k+".name", "%q is used by an earlier tenant", tn.Name)
		}
		seen[tn.Name] = true
		validateTargets(k+".targets", tn.Targets, base, home, bad)
		for j, t := range tn.Targets {
			if t.Kind == "local" && t.Workspace != "" {
				locals = append(locals, owned{tenant: tn.Name, key: fmt.Sprintf("%s.targets[%d].workspace", k, j), path: t.Workspace})
			}
		}
		ws := map[string]bool{}
		for j, w := range tn.Workspaces {
			wk := fmt.Sprintf("%s.workspaces[%d]", k, j)
			switch {
			case w.Name == "":
				bad(wk+".name", "is required")
			case ws[w.Name]:
				bad(wk+".name", "%q is used by an earlier workspace of tenant %q", w.Name, tn.Name)
			}
			ws[w.Name] = true
			if len(w.Targets) == 0 {
				bad(wk+".targets", "names no target")
			}
			for n, name := range w.Targets {
				if _, ok := tn.Target(name); !ok {
					bad(fmt.Sprintf("%s.targets[%d]", wk, n), "%q is not a target of tenant %q", name, tn.Name)
				}
			}
		}
	}
	// One tenant's local workspace must not lie inside another's: the
	// sandbox grant of one would reach the other's files. Judged on the
	// directories the paths resolve to, so a symlink hides no overlap.
	for i := range locals {
		locals[i].real = realPath(locals[i].path)
	}
	for i, a := range locals {
		for _, b := range locals[i+1:] {
			if a.tenant != b.tenant && (within(a.real, b.real) || within(b.real, a.real)) {
				bad(b.key, "%q of tenant %q%s overlaps %q of tenant %q (%s)%s; tenants' workspaces must be separate directories",
					b.path, b.tenant, resolvesTo(b.path, b.real), a.path, a.tenant, a.key, resolvesTo(a.path, a.real))
			}
		}
	}
}

// realPath is p with every symlink resolved; for a path that does not
// exist (yet), its nearest existing ancestor is resolved and the rest
// joined on, since the directory created there later lands under it.
func realPath(p string) string {
	rest := ""
	for cur := filepath.Clean(p); ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// resolvesTo says where a workspace path leads, when a symlink moves it.
func resolvesTo(p, real string) string {
	if p == real {
		return ""
	}
	return fmt.Sprintf(" (resolves to %q)", real)
}

func (c *Config) validateAuth(bad func(key, format string, a ...any)) {
	if c.Auth.MaxTTL < 0 {
		bad("auth.maxTTL", "must be positive")
	}
	seen := map[string]bool{c.Auth.Issuer: true}
	for i, is := range c.Auth.Issuers {
		k := fmt.Sprintf("auth.issuers[%d]", i)
		switch {
		case is.Issuer == "":
			bad(k+".issuer", "is required")
		case seen[is.Issuer]:
			bad(k+".issuer", "%q is used by tandem's own tokens or an earlier issuer", is.Issuer)
		}
		seen[is.Issuer] = true
		if (is.JWKSURL == "") == (len(is.PublicKeys) == 0) {
			bad(k, "needs exactly one of jwksUrl and publicKeys")
		}
		if is.JWKSURL != "" && !secureURL(is.JWKSURL) {
			bad(k+".jwksUrl", "must be https:// (plain http only on loopback), got %q", is.JWKSURL)
		}
		if is.Audience == "" {
			bad(k+".audience", "is required: the aud this issuer's tokens carry for this server")
		}
	}
}

// validateAskForward checks that a target whose network.ask is forward
// has an upstream to forward to: its policy's forward.
func (c *Config) validateAskForward(bad func(key, format string, a ...any)) {
	check := func(key, tenant string, t Target) {
		if t.Network.Ask != AskForward {
			return
		}
		if p := c.PolicyFor(tenant, t.Name); p == nil || p.Forward == nil {
			bad(key+".network.ask", "is forward, and the target's policy has no forward upstream: add policy.forward {url, tokenFile}, or set ask: true")
		}
	}
	if len(c.Tenants) == 0 {
		for i, t := range c.Targets {
			check(fmt.Sprintf("targets[%d]", i), DefaultTenant, t)
		}
	}
	for i, tn := range c.Tenants {
		for j, t := range tn.Targets {
			check(fmt.Sprintf("tenants[%d].targets[%d]", i, j), tn.Name, t)
		}
	}
}

// Decisions are the words a policy mode or rule decision may be.
var Decisions = []string{"allow", "yes", "deny", "no", "ask", "forward"}

// secureURL accepts https, and plain http only to a loopback host: what
// travels to it (keys, approvals, tokens) must not cross a network in
// the clear.
func secureURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// loopbackSquatter names a way for a session of this tandem to listen on
// this machine's loopback interface, or "" if there is none: a local
// target with network access or no sandbox, an ssh target (its host may
// be this machine; tandem cannot tell), or ad-hoc SSH hosts. Such a
// session could take a loopback port first and receive what is sent to
// it, so a plain-http loopback upstream proves nothing of who answers.
//
// A sandboxed local session without network: true cannot: it runs in a
// network namespace of its own, so what it listens on is on its own
// loopback, not this machine's; where the host refuses namespaces, the
// sandbox's fallback seccomp filter refuses listen(2) and every socket
// but TCP, and Landlock refuses TCP bind (TestNetworkContainment tries
// both, listen without bind and MPTCP included).
func (c *Config) loopbackSquatter() string {
	all := append([]Target(nil), c.Targets...)
	for _, tn := range c.Tenants {
		all = append(all, tn.Targets...)
	}
	for _, t := range all {
		switch {
		case t.Kind == "local" && t.Network.On:
			return fmt.Sprintf("local target %q has network: true", t.Name)
		case t.Kind == "local" && t.Sandbox == "none":
			return fmt.Sprintf("local target %q is unsandboxed (sandbox: none)", t.Name)
		case t.Kind == "ssh":
			return fmt.Sprintf("ssh target %q runs a shell with network access on %s, which may be this machine", t.Name, t.Host)
		}
	}
	if c.AllowAdHoc == nil || *c.AllowAdHoc {
		return "ad-hoc SSH hosts are allowed (allowAdHoc, default on over stdio), this machine among them"
	}
	for _, tn := range c.Tenants {
		if tn.AllowAdHoc {
			return fmt.Sprintf("tenant %q allows ad-hoc SSH hosts, this machine among them", tn.Name)
		}
	}
	return ""
}

// loopbackHTTP says whether u is a plain-http URL on loopback.
func loopbackHTTP(u string) bool {
	return secureURL(u) && strings.HasPrefix(strings.ToLower(u), "http:")
}

func validatePolicy(key string, p *Policy, base, home, squat string, bad func(key, format string, a ...any)) {
	if p == nil {
		return
	}
	if p.Mode != "" && !slices.Contains(Decisions, p.Mode) {
		bad(key+".mode", "must be allow, deny, ask or forward (or yes, no), got %q", p.Mode)
	}
	forwards := p.Mode == "forward"
	for i, r := range p.Rules {
		k := fmt.Sprintf("%s.rules[%d]", key, i)
		if !slices.Contains(Decisions, r.Decision) {
			bad(k+".decision", "must be allow, deny, ask or forward (or yes, no), got %q", r.Decision)
		}
		forwards = forwards || r.Decision == "forward"
		if r.Tool == "" && r.Command == "" && r.Path == "" {
			bad(k, "needs tool, command or both (or path, for file tools)")
		}
	}
	switch f := p.Forward; {
	case f == nil && forwards:
		bad(key+".forward", "is required when the mode or a rule says forward: {url, tokenFile} of the upstream approver")
	case f != nil:
		switch {
		case !secureURL(f.URL):
			bad(key+".forward.url", "must be https:// (plain http only on loopback), got %q", f.URL)
		case loopbackHTTP(f.URL) && squat != "":
			// The upstream gets the operator token and decides: whoever
			// listens there first would approve its own commands.
			bad(key+".forward.url", "plain http on loopback (%q) proves nothing of who answers, and %s: a session could listen on that port first, "+
				"receive the upstream's token and approve its own commands. Use an https:// upstream (caFile for a private CA), or give no target network access "+
				"(a sandboxed local session without network: true cannot listen on this machine's loopback)", f.URL, squat)
		}
		if f.CAFile != "" {
			f.CAFile = resolve(f.CAFile, base, home)
			if _, err := os.Stat(f.CAFile); err != nil {
				bad(key+".forward.caFile", "%q cannot be read: %v", f.CAFile, err)
			}
		}
		if (f.Token == "") == (f.TokenFile == "") {
			bad(key+".forward", "needs exactly one of token and tokenFile (the upstream's operator token)")
		}
		if f.TokenFile != "" {
			f.TokenFile = resolve(f.TokenFile, base, home)
			if _, err := os.Stat(f.TokenFile); err != nil {
				bad(key+".forward.tokenFile", "%q cannot be read: %v", f.TokenFile, err)
			}
		}
	}
	for i, a := range p.Approvers {
		if a != "dashboard" && a != "client" {
			bad(fmt.Sprintf("%s.approvers[%d]", key, i), "must be dashboard or client, got %q", a)
		}
	}
}

// PolicyFor returns the policy that applies to a tenant's target: the
// target's own, else the tenant's, else the top-level one (nil: allow).
func (c *Config) PolicyFor(tenant, target string) *Policy {
	if tn, ok := c.Tenant(tenant); ok {
		if t, ok := tn.Target(target); ok && t.Policy != nil {
			return t.Policy
		}
		if tn.Policy != nil {
			return tn.Policy
		}
	}
	return c.Policy
}

func nameOK(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func resolve(p, base, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	default:
		return filepath.Join(base, p)
	}
}

// Target returns the target named name.
func (c *Config) Target(name string) (Target, bool) {
	return findTarget(c.Targets, name)
}

// Target returns the tenant's target named name.
func (tn *Tenant) Target(name string) (Target, bool) {
	return findTarget(tn.Targets, name)
}

func findTarget(ts []Target, name string) (Target, bool) {
	for _, t := range ts {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// Tenant returns the tenant named name: a configured one, or, without
// tenants:, the default tenant that the top-level targets form.
func (c *Config) Tenant(name string) (*Tenant, bool) {
	if len(c.Tenants) == 0 {
		if name != DefaultTenant {
			return nil, false
		}
		all := make([]string, 0, len(c.Targets))
		for _, t := range c.Targets {
			all = append(all, t.Name)
		}
		return &Tenant{Name: DefaultTenant, Targets: c.Targets, AllowAdHoc: c.AdHocAllowed(false),
			Workspaces: []Workspace{{Name: DefaultTenant, Targets: all}}}, true
	}
	for i := range c.Tenants {
		if c.Tenants[i].Name == name {
			return &c.Tenants[i], true
		}
	}
	return nil, false
}

// InScope returns the names of the tenant's targets that a claim for
// workspace may reach: the workspace's targets, or all of them when the
// claim names no workspace. ok is false for a workspace that does not exist.
func (tn *Tenant) InScope(workspace string) (names []string, ok bool) {
	if workspace == "" {
		for _, t := range tn.Targets {
			names = append(names, t.Name)
		}
		return names, true
	}
	for _, w := range tn.Workspaces {
		if w.Name == workspace {
			return w.Targets, true
		}
	}
	return nil, false
}

// Exists checks that a claim's tenant and workspace are configured.
func (c *Config) Exists(tenant, workspace string) error {
	tn, ok := c.Tenant(tenant)
	if !ok {
		return fmt.Errorf("tenant %q is not configured", tenant)
	}
	if _, ok := tn.InScope(workspace); !ok {
		return fmt.Errorf("workspace %q is not configured for tenant %q", workspace, tenant)
	}
	return nil
}

// AdHocAllowed says whether ssh_connect may take host parameters, given
// whether the server runs over stdio.
func (c *Config) AdHocAllowed(stdio bool) bool {
	if c.AllowAdHoc != nil {
		return *c.AllowAdHoc
	}
	return stdio
}

// readableFile says, in a config's terms, why the file at p cannot serve
// as a key or password file: it is missing, a directory, or unreadable.
// Checking at load turns a typo into a refusal at start rather than an
// auth_failed at the first ssh_connect.
func readableFile(p string) error {
	f, err := os.Open(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%q cannot be read by this user", p)
	case err != nil:
		return fmt.Errorf("%q cannot be read: %w", p, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return fmt.Errorf("%q is a directory, not a file", p)
	}
	return nil
}

// knownHostsOK checks a target's own known_hosts file: it must be a
// readable file, or, with hostKeyPolicy accept-new, may be missing as long
// as its directory exists (the first pin creates it).
func knownHostsOK(p, policy string) error {
	err := readableFile(p)
	if err == nil {
		return nil
	}
	if _, serr := os.Stat(p); !errors.Is(serr, fs.ErrNotExist) {
		return err
	}
	if policy == "strict" {
		return fmt.Errorf("%q does not exist, and hostKeyPolicy strict trusts only the keys it lists", p)
	}
	if fi, derr := os.Stat(filepath.Dir(p)); derr != nil || !fi.IsDir() {
		return fmt.Errorf("%q does not exist, nor does its directory, where the first host key would be pinned", p)
	}
	return nil
}

// validateRedact checks a redact section and expands its "~/" paths; the
// raw key's path resolves like other files of the config.
func validateRedact(key string, r *Redact, base, home string, bad func(key, format string, a ...any)) {
	if r == nil {
		return
	}
	if r.RawKey != "" {
		r.RawKey = resolve(r.RawKey, base, home)
		if _, err := seal.ReadKey(r.RawKey); err != nil {
			bad(key+".rawKey", "%v", strings.TrimPrefix(err.Error(), "seal: "))
		}
	}
	for i, p := range r.SecretFiles {
		k := fmt.Sprintf("%s.secretFiles[%d]", key, i)
		switch {
		case p == "" || p == "~":
			bad(k, "must name a file, got %q", p)
		case strings.HasPrefix(p, "~/"):
			r.SecretFiles[i] = resolve(p, "", home)
		case strings.HasPrefix(p, "~"):
			bad(k, "only ~/ is expanded, not ~user/: %q", p)
		}
	}
	for i, name := range r.Env {
		if !envName(name) {
			bad(fmt.Sprintf("%s.env[%d]", key, i), "%q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
		}
	}
}

// envName reports whether s is a POSIX environment variable name.
func envName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// credentialHeaders are headers a credential may not set: the proxy
// frames the request with them.
var credentialHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "proxy-authorization", "proxy-connection", "keep-alive"}

// checkCredentials validates network.credentials: each names a host in
// the allowlist's syntax, a header and a value with {secret} in it, and
// exactly one of secretFile (an operator's file, resolved here) or
// secretEnv. Their secrets are read when a session starts.
func checkCredentials(key string, creds []Credential, base, home string, bad func(key, format string, a ...any)) {
	names := map[string]bool{}
	for i := range creds {
		c := &creds[i]
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case c.Name == "":
			bad(k+".name", "is required: records and replies name the credential by it")
		case names[c.Name]:
			bad(k+".name", "%q is used by an earlier credential", c.Name)
		}
		names[c.Name] = true
		if c.Host == "" {
			bad(k+".host", "is required")
		} else if strings.HasPrefix(c.Host, "preset:") {
			bad(k+".host", "must name a host, not a preset")
		} else if err := egress.CheckCredentialHost(c.Host); err != nil {
			bad(k+".host", "%v", err)
		}
		if c.Path != "" && !strings.HasPrefix(c.Path, "/") {
			bad(k+".path", "%q must start with /", c.Path)
		}
		if c.Header == "" {
			c.Header = "Authorization"
		}
		if !validHeaderName(c.Header) {
			bad(k+".header", "%q is not a header name", c.Header)
		} else if slices.Contains(credentialHeaders, strings.ToLower(c.Header)) {
			bad(k+".header", "%s frames the request and cannot carry a credential", c.Header)
		}
		if !credentialValue.MatchString(c.Value) {
			bad(k+".value", "must hold {secret} (e.g. \"Bearer {secret}\") or {USER:secret} for Basic auth (\"Basic {x-access-token:secret}\")")
		} else if strings.ContainsAny(c.Value, "\r\n") {
			bad(k+".value", "may not hold a line break")
		}
		switch {
		case (c.SecretFile == "") == (c.SecretEnv == ""):
			bad(k, "needs exactly one of secretFile (a file of the operator's) or secretEnv (a variable of tandem's own environment)")
		case slices.Contains([]string{"PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TZ", "HOME"}, c.SecretEnv):
			bad(k+".secretEnv", "%s is passed on to local shells: a secret there would enter the session", c.SecretEnv)
		case c.SecretFile != "":
			c.SecretFile = resolve(c.SecretFile, base, home)
			if _, err := os.Stat(c.SecretFile); err != nil {
				bad(k+".secretFile", "%v", err)
			}
		}
		if c.CAFile != "" {
			c.CAFile = resolve(c.CAFile, base, home)
			if b, err := os.ReadFile(c.CAFile); err != nil {
				bad(k+".caFile", "%v", err)
			} else if !x509.NewCertPool().AppendCertsFromPEM(b) {
				bad(k+".caFile", "%s holds no PEM certificate", c.CAFile)
			}
		}
	}
}

// credentialValue finds the secret's place in a credential's value.
var credentialValue = regexp.MustCompile(`\{([^{}:\s]*:)?secret\}`)

// CredentialValue renders a credential's header value with secret:
// {secret} is the secret, {USER:secret} the base64 of USER:secret.
func CredentialValue(template, secret string) string {
	return credentialValue.ReplaceAllStringFunc(template, func(m string) string {
		if user, ok := strings.CutSuffix(strings.Trim(m, "{}"), ":secret"); ok {
			return base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))
		}
		return secret
	})
}

// validHeaderName reports whether h is an HTTP header name (a token).
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range h {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c) {
			continue
		}
		return false
	}
	return true
}
