package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
)

// mintHint is the command that mints a bearer token this HTTP-mode
// tandem accepts, for its start line: the same config and data dir (the
// signing key), its first tenant, and a lifetime of a working day (or
// auth.maxTTL, if shorter), so that a copied token does not expire
// before the day is over.
func mintHint(o *Options, cfg *config.Config) string {
	args := []string{"tandem", "token", "issue"}
	if o.ConfigPath != "" {
		p, err := filepath.Abs(o.ConfigPath)
		if err != nil {
			p = o.ConfigPath
		}
		args = append(args, "--config", p)
	}
	if o.DataDir != "" {
		p, err := filepath.Abs(o.DataDir)
		if err != nil {
			p = o.DataDir
		}
		args = append(args, "--data-dir", p)
	}
	tenant := config.DefaultTenant
	if len(cfg.Tenants) > 0 {
		tenant = cfg.Tenants[0].Name
	}
	actor := os.Getenv("USER")
	if actor == "" || strings.ContainsAny(actor, " '\"$") {
		actor = "you"
	}
	ttl := min(8*time.Hour, time.Duration(cfg.Auth.MaxTTL))
	d := ttl.String()
	switch {
	case ttl%time.Hour == 0:
		d = fmt.Sprintf("%dh", ttl/time.Hour)
	case ttl%time.Minute == 0:
		d = fmt.Sprintf("%dm", ttl/time.Minute)
	}
	for i, a := range args {
		if strings.ContainsAny(a, " '\"$\\`*?;&|<>()") {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(append(args, "--tenant", tenant, "--actor", actor, "--ttl", d), " ")
}
