package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tandem-sh/tandem/internal/claim"
)

// TestHTTPLoad: 2 tenants x 10 sessions x 50 commands, all at once over
// HTTP. Every output is exact (no byte crosses sessions), every call is
// audited with its tenant and claim fingerprint, and the chain verifies.
func TestHTTPLoad(t *testing.T) {
	const tenants, perTenant, commands = 2, 10, 50
	w := newTwoTenants(t, "")
	s := startHTTP(t, httpOpts{config: w.yaml})
	key, err := claim.LoadOrCreateKey(s.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	v := &claim.Verifier{OwnName: "tandem", OwnKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}, OwnAudience: "tandem"}

	type worker struct {
		tenant, token, fingerprint, session string
		cs                                  *sdk.ClientSession
	}
	var workers []*worker
	for i := range tenants * perTenant {
		tenant := []string{"acme", "beta"}[i%tenants]
		tok := s.token(t, "--tenant", tenant, "--actor", fmt.Sprintf("agent-%d", i))
		c, err := v.Verify(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, &worker{tenant: tenant, token: tok, fingerprint: c.Fingerprint,
			session: fmt.Sprintf("load-%d", i), cs: s.client(t, tok).CS})
	}

	errs := make(chan error, len(workers)*commands)
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			call := func(tool string, args map[string]any) (map[string]any, error) {
				res, err := wk.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
				if err != nil {
					return nil, err
				}
				var r map[string]any
				if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &r); err != nil {
					return nil, err
				}
				if r["success"] != true {
					return nil, fmt.Errorf("%s: %v", tool, r)
				}
				return r, nil
			}
			target := map[string]any{"name": wk.session, "target": "build"}
			r, err := call("ssh_connect", target)
			if err != nil {
				errs <- err
				return
			}
			tok := r["sessionToken"].(string)
			for n := range commands {
				// Output unique to this worker and command, on both streams.
				mark := fmt.Sprintf("w%02d-c%02d", i, n)
				r, err := call("ssh_exec", map[string]any{"sessionName": wk.session, "sessionToken": tok,
					"command": fmt.Sprintf("printf '%s\\n'; printf '%s-err\\n' >&2; seq 1 %d | tail -1", mark, mark, n+1)})
				if err != nil {
					errs <- err
					return
				}
				res := r["result"].(map[string]any)
				if want := fmt.Sprintf("%s\n%d\n", mark, n+1); res["stdout"] != want || res["stderr"] != mark+"-err\n" {
					errs <- fmt.Errorf("worker %d command %d: stdout %q stderr %q, want %q", i, n, res["stdout"], res["stderr"], want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	// Every exec is in the audit, with its caller's tenant and fingerprint.
	want := map[string]string{} // fingerprint -> tenant
	for _, wk := range workers {
		want[wk.fingerprint] = wk.tenant
	}
	execs := map[string]int{}
	for _, r := range auditJSON(t, s.dataDir) {
		if r.Tool != "ssh_exec" {
			continue
		}
		if tenant, ok := want[r.ClaimFingerprint]; !ok || tenant != r.Tenant {
			t.Errorf("exec record %d: tenant %q, fingerprint %q matches no caller of that tenant", r.Seq, r.Tenant, r.ClaimFingerprint)
		}
		execs[r.ClaimFingerprint]++
	}
	for _, wk := range workers {
		if execs[wk.fingerprint] != commands {
			t.Errorf("%s: %d audited execs, want %d", wk.session, execs[wk.fingerprint], commands)
		}
	}
	out, err := exec.Command(binary, "audit", "verify", "--data-dir", s.dataDir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "audit chain intact") {
		t.Errorf("audit verify: %v %s", err, out)
	}
	var tokens []string
	for _, wk := range workers {
		tokens = append(tokens, wk.token)
	}
	assertNoToken(t, s, tokens...)
}
