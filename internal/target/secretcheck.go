package target

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tandem-sh/tandem/internal/config"
)

// MissingSecretFile is a secret file of the redact settings that does not
// exist when tandem starts, and what that means for the targets it
// applies to.
type MissingSecretFile struct {
	// Path is where tandem looked.
	Path string
	// Targets are the targets (tenant/name, or "ad-hoc ssh sessions") whose
	// settings list it.
	Targets []string
	// Refuses is true for an absolute or "~/" path: their sessions do not
	// start (redaction_unavailable) until it exists. A relative one, read
	// beside tandem.yaml for an ssh target, holds no secrets until it
	// appears, and their sessions start without it.
	Refuses bool
}

// MissingSecretFiles lists the secret files that tandem.yaml's redact
// sections name and that do not exist now, so that the operator is told at
// start rather than by a failed connect. A local target's relative files
// are the workspace's (a project may lack its .env) and are not listed.
func (r *Resolver) MissingSecretFiles() []MissingSecretFile {
	if r.Config == nil {
		return nil
	}
	var out []MissingSecretFile
	note := func(path, target string, refuses bool) {
		for i := range out {
			if out[i].Path == path {
				if !slices.Contains(out[i].Targets, target) {
					out[i].Targets = append(out[i].Targets, target)
				}
				return
			}
		}
		out = append(out, MissingSecretFile{Path: path, Targets: []string{target}, Refuses: refuses})
	}
	check := func(tenant, name, label string, local bool) {
		for _, p := range r.Config.RedactFor(tenant, name).SecretFiles {
			relative := !filepath.IsAbs(p) && !strings.HasPrefix(p, "~")
			if relative && local {
				continue
			}
			path := p
			if relative {
				path = filepath.Join(r.Config.BaseDir(), p)
			}
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				note(path, label, !relative)
			}
		}
	}
	tenants := r.Config.Tenants
	if len(tenants) == 0 {
		if tn, ok := r.Config.Tenant(config.DefaultTenant); ok {
			tenants = []config.Tenant{*tn}
		}
	}
	for _, tn := range tenants {
		prefix := ""
		if len(r.Config.Tenants) > 0 {
			prefix = tn.Name + "/"
		}
		for _, t := range tn.Targets {
			check(tn.Name, t.Name, prefix+t.Name, t.Kind == "local")
		}
		if r.Stdio && r.Config.AdHocAllowed(true) || !r.Stdio && tn.AllowAdHoc {
			check(tn.Name, "", prefix+"ad-hoc ssh sessions", false)
		}
	}
	return out
}

// CheckSecretFiles logs, at start, each secret file that MissingSecretFiles
// finds, naming it and the targets it leaves without its secrets or
// refuses.
func (r *Resolver) CheckSecretFiles() {
	if r.Log == nil {
		return
	}
	for _, m := range r.MissingSecretFiles() {
		targets := strings.Join(m.Targets, ", ")
		if m.Refuses {
			r.Log.Warn("redact: a secret file does not exist: sessions of these targets will not start (redaction_unavailable) until it does; create it, or remove it from secretFiles",
				"file", m.Path, "targets", targets)
			continue
		}
		r.Log.Warn("redact: a secret file does not exist beside tandem.yaml: sessions of these ssh targets start without its secrets, and its values count once it is created; "+
			"a relative secret file means a local target's workspace file and, for ssh targets, one beside tandem.yaml",
			"file", m.Path, "targets", targets)
	}
}
