// Package config loads and validates tandem.yaml: the targets agents may
// connect to, lease and output limits, and what callers may do ad hoc.
// Every error names the file, the key and the reason, so a bad config fails
// at start instead of at the first call. It reads files only; it knows
// nothing of shells, sessions or MCP.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

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
}

// Web configures the browser terminal.
type Web struct {
	// PublicHosts are the names (besides loopback ones) that browsers may
	// use to reach the terminal, e.g. a reverse proxy's. Requests naming any
	// other host are refused.
	PublicHosts []string `yaml:"publicHosts"`
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
	// Network lets a local target open network connections; default off.
	Network bool `yaml:"network"`
	// Sandbox is "landlock" (the default) or "none" for a local target.
	Sandbox string `yaml:"sandbox"`
	// ReadOnly adds files and directories a sandboxed local session may
	// read to the default system set: e.g. ~/.bashrc and the tool
	// directories it sets up, so the user's own rc file loads.
	ReadOnly []string `yaml:"readOnly"`

	Host          string `yaml:"host"`
	Port          int    `yaml:"port"`
	User          string `yaml:"user"`
	KeyFile       string `yaml:"keyFile"`
	UseAgent      bool   `yaml:"useAgent"`
	KnownHosts    string `yaml:"knownHosts"`
	HostKeyPolicy string `yaml:"hostKeyPolicy"`
}

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
}

// DefaultInlineOutputBytes is the inline output budget of one reply. It
// sits well under what agent clients keep of a tool result (Claude Code
// about 25,000 tokens, Codex about 10 KiB); the rest is one ssh_read_output
// call away.
const DefaultInlineOutputBytes = 32 << 10

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
	c := &Config{Targets: []Target{{Name: "local", Kind: "local", Workspace: dir}}}
	c.fill()
	return c
}

// Load reads and validates the file at path. Relative workspace and key
// paths are resolved against the file's directory; "~/" against home.
func Load(path, home string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(b, filepath.Dir(path), home)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates YAML; base and home resolve relative paths.
func Parse(b []byte, base, home string) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	c.fill()
	if err := c.validate(base, home); err != nil {
		return nil, err
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
		l.CommandTimeout = Duration(120 * time.Second)
	}
	if l.KeepaliveInterval == 0 {
		l.KeepaliveInterval = Duration(5 * time.Second)
	}
	l.InlineOutputBytes = DefaultInlineOutputBytes
	if l.InlineOutput != nil {
		l.InlineOutputBytes = *l.InlineOutput
	}
	if c.Audit.OnFailure == "" {
		c.Audit.OnFailure = AuditRefuse
	}
	for i := range c.Targets {
		t := &c.Targets[i]
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

func (c *Config) validate(base, home string) error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	seen := map[string]bool{}
	for i := range c.Targets {
		t := &c.Targets[i]
		k := fmt.Sprintf("targets[%d]", i)
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
			for j, p := range t.ReadOnly {
				t.ReadOnly[j] = resolve(p, base, home)
				if _, err := os.Stat(t.ReadOnly[j]); err != nil {
					bad(fmt.Sprintf("%s.readOnly[%d]", k, j), "%q does not exist", t.ReadOnly[j])
				}
			}
		case "ssh":
			if t.Host == "" {
				bad(k+".host", "is required for an ssh target")
			}
			if t.User == "" {
				bad(k+".user", "is required for an ssh target")
			}
			if t.Port < 1 || t.Port > 65535 {
				bad(k+".port", "must be 1-65535, got %d", t.Port)
			}
			if t.KeyFile == "" && !t.UseAgent {
				bad(k, "needs keyFile or useAgent: true (passwords are not stored in config)")
			}
			if t.KeyFile != "" {
				t.KeyFile = resolve(t.KeyFile, base, home)
			}
			if t.KnownHosts != "" {
				t.KnownHosts = resolve(t.KnownHosts, base, home)
			}
			if t.HostKeyPolicy != "strict" && t.HostKeyPolicy != "accept-new" {
				bad(k+".hostKeyPolicy", "must be strict or accept-new, got %q", t.HostKeyPolicy)
			}
		default:
			bad(k+".kind", "must be local or ssh, got %q", t.Kind)
		}
	}
	l := c.Limits
	if l.IdleTimeout < 0 || l.MaxLifetime < 0 || l.CommandTimeout < 0 || l.KeepaliveInterval < 0 {
		bad("limits", "durations must be positive")
	}
	if l.InlineOutputBytes != 0 && l.InlineOutputBytes < 1024 {
		bad("limits.inlineOutputBytes", "must be 0 (no bound) or at least 1024, got %d", l.InlineOutputBytes)
	}
	if c.Audit.OnFailure != AuditRefuse && c.Audit.OnFailure != AuditContinue {
		bad("audit.onFailure", "must be refuse or continue, got %q", c.Audit.OnFailure)
	}
	for i, h := range c.Web.PublicHosts {
		if h == "" || strings.ContainsAny(h, "/:@ ") {
			bad(fmt.Sprintf("web.publicHosts[%d]", i), "must be a bare host name, got %q", h)
		}
	}
	return errors.Join(errs...)
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
	for _, t := range c.Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

// AdHocAllowed says whether ssh_connect may take host parameters, given
// whether the server runs over stdio.
func (c *Config) AdHocAllowed(stdio bool) bool {
	if c.AllowAdHoc != nil {
		return *c.AllowAdHoc
	}
	return stdio
}
