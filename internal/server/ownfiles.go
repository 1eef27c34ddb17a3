package server

import (
	"fmt"
	"path/filepath"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/sandbox"
)

// ownFile is a file tandem reads at start or trusts later: its config,
// its keys and tokens, the host keys it pins to.
type ownFile struct{ what, path string }

// ownFiles lists the files of o and cfg that must not lie where a session
// can write: the config, the TLS key and certificate, the signing key,
// the operator token, the cluster secret, forward tokens, the raw-key
// recipient, ssh targets' key, password and known_hosts files, and the
// secret and CA files of local targets' network credentials.
func ownFiles(o *Options, cfg *config.Config) []ownFile {
	var out []ownFile
	add := func(what, p string) {
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			out = append(out, ownFile{what, p})
		}
	}
	add("config file", o.ConfigPath)
	add("TLS key (--tls-key)", o.TLSKey)
	add("TLS certificate (--tls-cert)", o.TLSCert)
	add("signing key (auth.signingKey)", cfg.Auth.SigningKey)
	add("operator token file (web.operatorTokenFile)", cfg.Web.OperatorTokenFile)
	add("cluster secret file (cluster.secretFile)", cfg.Cluster.SecretFile)
	policy := func(key string, p *config.Policy) {
		if p != nil && p.Forward != nil {
			add("forward token file ("+key+".forward.tokenFile)", p.Forward.TokenFile)
		}
	}
	redact := func(key string, r *config.Redact) {
		if r != nil {
			add("raw-key recipient ("+key+".rawKey)", r.RawKey)
		}
	}
	policy("policy", cfg.Policy)
	redact("redact", cfg.Redact)
	for i, tn := range cfg.Tenants {
		policy(fmt.Sprintf("tenants[%d].policy", i), tn.Policy)
		redact(fmt.Sprintf("tenants[%d].redact", i), tn.Redact)
	}
	for _, tt := range tenantTargets(cfg) {
		t := tt.t
		policy("target "+t.Name+"'s policy", t.Policy)
		redact("target "+t.Name+"'s redact", t.Redact)
		for _, c := range t.Network.Credentials {
			add("secret file of target "+t.Name+"'s credential "+c.Name+" (network.credentials secretFile)", c.SecretFile)
			add("CA file of target "+t.Name+"'s credential "+c.Name+" (network.credentials caFile)", c.CAFile)
		}
		if t.Kind == "ssh" {
			add("ssh key of target "+t.Name+" (keyFile)", t.KeyFile)
			add("password file of target "+t.Name+" (passwordFile)", t.PasswordFile)
			add("known_hosts of target "+t.Name+" (knownHosts)", t.KnownHosts)
		}
	}
	return out
}

// ownFilesInWorkspace refuses to start when one of tandem's own files
// lies in a sandboxed local target's workspace, which its sessions can
// write: an agent could rewrite the config (its policy, its targets) for
// the next start, or swap a key or token. The data dir and run dir are
// judged by unsafeWorkspaces. An unsandboxed target (sandbox: none) can
// write wherever the user can, which its config chose knowingly.
func ownFilesInWorkspace(o *Options, cfg *config.Config) error {
	files := ownFiles(o, cfg)
	for _, tt := range tenantTargets(cfg) {
		t := tt.t
		if t.Kind != "local" || t.Sandbox == "none" || t.Workspace == "" {
			continue
		}
		for _, f := range files {
			if sandbox.Covers(t.Workspace, f.path) {
				return fmt.Errorf("tandem's %s %s lies inside the workspace %s of local target %q, which its sessions can write: "+
					"an agent could rewrite it and tandem would trust it at its next start. Move it outside %s (tandem init writes tandem.yaml beside the workspace, not in it)",
					f.what, f.path, t.Workspace, t.Name, t.Workspace)
			}
		}
	}
	return nil
}
