package server

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/sandbox"
	"github.com/tandem-sh/tandem/internal/target"
)

// unsafeWorkspaces finds sandboxed local targets whose grants would give a
// session tandem's own state (database, audit, spools, recordings) or the
// run dirs of other sessions. A workspace chosen on purpose (config file or
// --workspace) that does this is an error at start; the implicit one (the
// current directory) is refused only when a session is asked for, with the
// same message, so that `tandem serve` from $HOME still serves SSH targets.
func unsafeWorkspaces(cfg *config.Config, chosen bool, home, dataDir, runDir string) (map[string]string, error) {
	refused := map[string]string{}
	for _, tt := range tenantTargets(cfg) {
		t, key := tt.t, target.RefusedKey(tt.tenant, tt.t.Name)
		if t.Kind != "local" || t.Sandbox == "none" {
			continue
		}
		grants := append(append([]string{t.Workspace}, sandbox.DefaultReadOnly()...), t.ReadOnly...)
		for _, g := range grants {
			for _, own := range []struct{ what, path string }{{"data dir", dataDir}, {"run dir", runDir}} {
				if !sandbox.Covers(g, own.path) {
					continue
				}
				why := fmt.Sprintf("local target %q: the sandbox grant %s covers tandem's %s %s, so a session could read or rewrite tandem's own state; "+
					"pass --workspace DIR with a project directory, or --data-dir outside %s", t.Name, g, own.what, own.path, g)
				if chosen {
					return nil, errors.New(why)
				}
				if _, seen := refused[key]; !seen {
					refused[key] = why
				}
			}
		}
		if _, seen := refused[key]; !seen && !chosen {
			if what := broadWorkspace(t.Workspace, home); what != "" {
				refused[key] = fmt.Sprintf("local target %q: the workspace would be %s, tandem's current directory, which is %s: "+
					"a session could change anything in it. Pass --workspace DIR with the project directory (or set workspace in tandem.yaml)",
					t.Name, t.Workspace, what)
			}
		}
	}
	return refused, nil
}

// implicitTarget names the local target whose workspace is only tandem's
// current directory, which the client's MCP roots may replace (stdio).
func implicitTarget(o *Options, cfg *config.Config) string {
	if o.ConfigPath != "" || o.Workspace != "" || o.HTTP != "" || len(cfg.Targets) != 1 {
		return ""
	}
	return cfg.Targets[0].Name
}

// checkRoot vets a workspace that the client's MCP roots name, as an
// implicit one: not a broad directory, and no grant over tandem's state.
func checkRoot(dir, home, dataDir, runDir string) error {
	if what := broadWorkspace(dir, home); what != "" {
		return fmt.Errorf("the client's root %s is %s: a session could change anything in it", dir, what)
	}
	for _, own := range []string{dataDir, runDir} {
		if sandbox.Covers(dir, own) {
			return fmt.Errorf("the client's root %s holds tandem's own state (%s)", dir, own)
		}
	}
	return nil
}

// broadWorkspace says why dir is no place to let an agent write everywhere
// (the root, a home directory, a system directory), or "" if it is fine.
// It applies to the implicit workspace only: one chosen on purpose is the
// user's call.
func broadWorkspace(dir, home string) string {
	dir = filepath.Clean(dir)
	switch {
	case dir == "/":
		return "the root directory"
	case home != "" && dir == filepath.Clean(home):
		return "your home directory"
	}
	for _, exact := range []string{"/home", "/root", "/tmp", "/var", "/opt", "/srv", "/mnt", "/media"} {
		if dir == exact {
			return "a system directory"
		}
	}
	for _, tree := range []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc", "/sys", "/run"} {
		if dir == tree || strings.HasPrefix(dir, tree+"/") {
			return "a system directory"
		}
	}
	return ""
}

// stdioTenant is the tenant a stdio client acts as: the default one, or
// the only configured tenant.
func stdioTenant(cfg *config.Config) string {
	if len(cfg.Tenants) == 1 {
		return cfg.Tenants[0].Name
	}
	return config.DefaultTenant
}

// tenantTarget is a target with the tenant it belongs to.
type tenantTarget struct {
	tenant string
	t      config.Target
}

// tenantTargets lists every target with its tenant: the top-level ones
// belong to the default tenant.
func tenantTargets(cfg *config.Config) []tenantTarget {
	var out []tenantTarget
	for _, t := range cfg.Targets {
		out = append(out, tenantTarget{config.DefaultTenant, t})
	}
	for _, tn := range cfg.Tenants {
		for _, t := range tn.Targets {
			out = append(out, tenantTarget{tn.Name, t})
		}
	}
	return out
}

// targetLines describes every target for the startup log, named
// tenant/target where tenants are configured; a local target refused for
// its workspace says so, so the line never lists it as if it served.
func targetLines(cfg *config.Config, refused map[string]string) []string {
	var out []string
	for _, tt := range tenantTargets(cfg) {
		t := tt.t
		name := t.Name
		if len(cfg.Tenants) > 0 {
			name = tt.tenant + "/" + t.Name
		}
		desc := name + " (" + t.Kind
		switch {
		case t.Kind == "local":
			desc += ", workspace " + t.Workspace
			if t.Sandbox == "none" {
				desc += ", unsandboxed"
			}
		default:
			desc += ", " + t.User + "@" + t.Host
		}
		if refused[target.RefusedKey(tt.tenant, t.Name)] != "" {
			desc += ", REFUSED: see the warning above"
		}
		out = append(out, desc+")")
	}
	return out
}

// DefaultDataDir is where tandem keeps its state when --data-dir is not
// given: $XDG_STATE_HOME/tandem, else ~/.local/state/tandem.
func DefaultDataDir(home string) string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "tandem")
	}
	return filepath.Join(home, ".local", "state", "tandem")
}

// shellEnv is the environment local shells start from: enough to work,
// never tandem's own secrets.
func shellEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}
