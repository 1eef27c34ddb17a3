package server

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/forward"
	"github.com/tandem-sh/tandem/internal/mcp"
	"github.com/tandem-sh/tandem/internal/metrics"
	"github.com/tandem-sh/tandem/internal/policy"
)

// compilePolicies compiles every policy in the config once, so that a bad
// rule stops tandem at start rather than at the first call, and returns
// the lookup the MCP server asks per call.
func compilePolicies(cfg *config.Config, httpMode bool) (func(tenant, target string) mcp.Policy, error) {
	compiled := map[*config.Policy]*policy.Policy{}
	upstreams := map[*config.Policy]*forward.Client{}
	add := func(key string, p *config.Policy) error {
		if p == nil {
			return nil
		}
		specs := make([]policy.RuleSpec, 0, len(p.Rules))
		for _, r := range p.Rules {
			specs = append(specs, policy.RuleSpec{Tool: r.Tool, Command: r.Command, Path: r.Path, Decision: r.Decision})
		}
		c, err := policy.Compile(p.Mode, specs)
		if err != nil {
			return fmt.Errorf("config: %s: %w", key, err)
		}
		compiled[p] = c
		if f := p.Forward; f != nil {
			tok := f.Token
			if f.TokenFile != "" {
				b, err := os.ReadFile(f.TokenFile)
				if err != nil {
					return fmt.Errorf("config: %s.forward.tokenFile: %w", key, err)
				}
				tok = strings.TrimSpace(string(b))
			}
			up := &forward.Client{URL: f.URL, Token: tok}
			if f.CAFile != "" {
				pem, err := os.ReadFile(f.CAFile)
				if err != nil {
					return fmt.Errorf("config: %s.forward.caFile: %w", key, err)
				}
				up.RootCAs = x509.NewCertPool()
				if !up.RootCAs.AppendCertsFromPEM(pem) {
					return fmt.Errorf("config: %s.forward.caFile: %s holds no PEM certificate", key, f.CAFile)
				}
			}
			upstreams[p] = up
		}
		return nil
	}
	if err := add("policy", cfg.Policy); err != nil {
		return nil, err
	}
	for i := range cfg.Targets {
		if err := add(fmt.Sprintf("targets[%d].policy", i), cfg.Targets[i].Policy); err != nil {
			return nil, err
		}
	}
	for i := range cfg.Tenants {
		tn := &cfg.Tenants[i]
		if err := add(fmt.Sprintf("tenants[%d].policy", i), tn.Policy); err != nil {
			return nil, err
		}
		for j := range tn.Targets {
			if err := add(fmt.Sprintf("tenants[%d].targets[%d].policy", i, j), tn.Targets[j].Policy); err != nil {
				return nil, err
			}
		}
	}
	return func(tenant, target string) mcp.Policy {
		cp := cfg.PolicyFor(tenant, target)
		p := compiled[cp]
		if p == nil {
			// No policy: nothing is judged, and a held ask (a network
			// connection) goes to the default approvers.
			return mcp.Policy{AskClient: askClient(nil, httpMode)}
		}
		mp := mcp.Policy{Judge: p, AskClient: askClient(cp.Approvers, httpMode)}
		if up := upstreams[cp]; up != nil {
			mp.Upstream = up
		}
		return mp
	}, nil
}

// newBroker holds this process's approvals, durable through the journal.
func newBroker(cfg *config.Config, j approval.Journal, log *slog.Logger) *approval.Broker {
	a := cfg.Approvals
	return approval.New(approval.Options{
		Wait:        time.Duration(a.WaitSeconds) * time.Second,
		Timeout:     time.Duration(a.TimeoutSeconds) * time.Second,
		MaxRemember: time.Duration(a.MaxRememberMinutes) * time.Minute,
		Journal:     j,
		Logger:      log,
	})
}

// askClient says whether the agent's client may answer approvals: the
// policy's approvers name it, or by default over stdio, where the client
// is the human's own. In HTTP mode the client may be the agent itself,
// so only an explicit "client" lets it answer.
func askClient(approvers []string, httpMode bool) bool {
	if approvers == nil {
		return !httpMode
	}
	return slices.Contains(approvers, "client")
}

// countedJournal counts each decision for the metrics as it records it.
type countedJournal struct {
	approval.Journal
	met *metrics.Metrics
}

func (j countedJournal) Decided(ctx context.Context, a approval.Approval) error {
	by := ""
	if a.Decision != nil {
		by = a.Decision.By
	}
	j.met.ApprovalDecided(string(a.Status), by)
	return j.Journal.Decided(ctx, a)
}

// readyz answers 200 while calls can be served and recorded (the audit
// log is writable), else 503 with the reason.
func readyz(srv *mcp.Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := srv.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}
