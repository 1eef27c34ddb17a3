package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/config"
)

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "targets:\n  - name: a\n    kind: local\n    workspce: x\n", "line 4: targets[0].workspce: unknown key; did you mean workspace?"},
		{"bad kind", "targets:\n  - name: a\n    kind: docker\n", "targets[0].kind: must be local or ssh"},
		{"missing workspace", "targets:\n  - name: a\n    kind: local\n", "targets[0].workspace: is required"},
		{"no such workspace", "targets:\n  - name: a\n    kind: local\n    workspace: /nope/nope\n", `targets[0].workspace: "/nope/nope" is not an existing directory`},
		{"duplicate", "targets:\n  - {name: a, kind: local, workspace: .}\n  - {name: a, kind: local, workspace: .}\n", `targets[1].name: "a" is used`},
		{"ssh port", "targets:\n  - {name: s, kind: ssh, host: h, user: u, port: 70000, keyFile: k}\n", "targets[0].port: must be 1-65535"},
		{"ssh auth", "targets:\n  - {name: s, kind: ssh, host: h, user: u}\n", "needs keyFile, useAgent: true or passwordFile"},
		{"policy", "targets:\n  - {name: s, kind: ssh, host: h, user: u, keyFile: k, hostKeyPolicy: yolo}\n", "hostKeyPolicy: must be strict or accept-new"},
		{"duration", "limits:\n  idleTimeout: soon\n", `"soon" is not a duration`},
		{"sandbox", "targets:\n  - {name: a, kind: local, workspace: ., sandbox: docker}\n", "sandbox: must be landlock or none"},
		{"not yaml", "targets: [\n", "line"},
		{"relative unixSockets", "targets:\n  - {name: a, kind: local, workspace: ., unixSockets: [run/db.sock]}\n", `targets[0].unixSockets[0]: "run/db.sock" is not an absolute path`},
		{"unixSockets unsandboxed", "targets:\n  - {name: a, kind: local, workspace: ., sandbox: none, unixSockets: [/run/db.sock]}\n", `targets[0].unixSockets[0]: applies with the sandbox only`},
		{"unixSockets over ssh", "targets:\n  - {name: a, kind: ssh, host: h, user: u, keyFile: /k, unixSockets: [/run/db.sock]}\n", `targets[0].unixSockets: applies to local targets only`},
		{"missing readOnly", "targets:\n  - {name: a, kind: local, workspace: ., readOnly: [/nope/rc]}\n", `targets[0].readOnly[0]: "/nope/rc" does not exist`},
		{"tiny inline budget", "limits:\n  inlineOutputBytes: 512\n", "limits.inlineOutputBytes: must be 0 (no bound) or at least 1024"},
		{"negative inline budget", "limits:\n  inlineOutputBytes: -1\n", "limits.inlineOutputBytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, "/home/x")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadResolvesAndDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tandem.yaml")
	y := "targets:\n  - {name: w, kind: local, workspace: ws}\n  - {name: s, kind: ssh, host: h, user: u, keyFile: ~/.ssh/id}\nlimits:\n  idleTimeout: 5m\n"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p, home)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := c.Target("w")
	s, _ := c.Target("s")
	if w.Workspace != filepath.Join(dir, "ws") || w.Sandbox != "landlock" || w.Network.On || w.Network.Proxied() {
		t.Errorf("local target: %+v", w)
	}
	if s.Port != 22 || s.KeyFile != filepath.Join(home, ".ssh", "id") || s.HostKeyPolicy != "accept-new" {
		t.Errorf("ssh target: %+v", s)
	}
	if time.Duration(c.Limits.IdleTimeout) != 5*time.Minute || time.Duration(c.Limits.CommandTimeout) != 50*time.Second || c.Limits.InlineOutputBytes != 32<<10 {
		t.Errorf("limits: %+v", c.Limits)
	}
	if !c.AdHocAllowed(true) || c.AdHocAllowed(false) {
		t.Error("ad hoc default: allowed over stdio only")
	}
	if _, err := config.Load(filepath.Join(dir, "missing.yaml"), "/"); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error should name it: %v", err)
	}
}

func TestEmptyAndDefault(t *testing.T) {
	if _, err := config.Parse(nil, "/", "/"); err != nil {
		t.Fatalf("empty config: %v", err)
	}
	d := config.Default("/work")
	if len(d.Targets) != 1 || d.Targets[0].Name != "local" || d.Targets[0].Sandbox != "landlock" {
		t.Errorf("default: %+v", d.Targets)
	}
}

// TestInlineBudget: left out means the bounded default; an explicit 0 is
// the unbounded contract (every byte inline), not the default.
func TestInlineBudget(t *testing.T) {
	tests := []struct {
		yaml string
		want int
	}{
		{"", config.DefaultInlineOutputBytes},
		{"limits:\n  idleTimeout: 1m\n", config.DefaultInlineOutputBytes},
		{"limits:\n  inlineOutputBytes: 0\n", 0},
		{"limits:\n  inlineOutputBytes: 4096\n", 4096},
	}
	for _, tc := range tests {
		c, err := config.Parse([]byte(tc.yaml), "/", "/")
		if err != nil || c.Limits.InlineOutputBytes != tc.want {
			t.Errorf("%q: %v, budget %d, want %d", tc.yaml, err, c.Limits.InlineOutputBytes, tc.want)
		}
	}
	if d := config.Default("/"); d.Limits.InlineOutputBytes != config.DefaultInlineOutputBytes {
		t.Errorf("embedded default budget %d", d.Limits.InlineOutputBytes)
	}
}

func TestTenantErrors(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "a/inner", "b"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"both", "targets: [{name: x, kind: local, workspace: a}]\ntenants: [{name: t1}]\n", "targets: cannot be used with tenants"},
		{"tenant name", "tenants: [{name: 'a b'}]\n", `tenants[0].name: "a b" must be letters`},
		{"duplicate tenant", "tenants: [{name: t1}, {name: t1}]\n", `tenants[1].name: "t1" is used`},
		{"tenant target", "tenants: [{name: t1, targets: [{name: x, kind: local}]}]\n", "tenants[0].targets[0].workspace: is required"},
		{"workspace target", "tenants: [{name: t1, targets: [{name: x, kind: local, workspace: a}], workspaces: [{name: w, targets: [y]}]}]\n", `tenants[0].workspaces[0].targets[0]: "y" is not a target of tenant "t1"`},
		{"empty workspace", "tenants: [{name: t1, workspaces: [{name: w}]}]\n", "tenants[0].workspaces[0].targets: names no target"},
		{"overlap", "tenants:\n  - {name: t1, targets: [{name: x, kind: local, workspace: a}]}\n  - {name: t2, targets: [{name: x, kind: local, workspace: a/inner}]}\n", "tenants[1].targets[0].workspace"},
		{"issuer keys", "auth: {issuers: [{issuer: idp, audience: me}]}\n", "auth.issuers[0]: needs exactly one of jwksUrl and publicKeys"},
		{"issuer http", "auth: {issuers: [{issuer: idp, audience: me, jwksUrl: 'http://idp.example/jwks'}]}\n", "auth.issuers[0].jwksUrl: must be https://"},
		{"issuer audience", "auth: {issuers: [{issuer: idp, jwksUrl: 'https://idp.example/jwks'}]}\n", "auth.issuers[0].audience: is required"},
		{"issuer clash", "auth: {issuers: [{issuer: tandem, audience: me, jwksUrl: 'https://idp.example/jwks'}]}\n", `auth.issuers[0].issuer: "tandem" is used`},
		{"password file", "tenants: [{name: t1, targets: [{name: s, kind: ssh, host: h, user: u, passwordFile: nope}]}]\n", "tenants[0].targets[0].passwordFile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, "/home/x")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestTenantScope(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	y := "tenants:\n" +
		"  - name: acme\n    targets: [{name: build, kind: local, workspace: a}, {name: prod, kind: ssh, host: h, user: u, keyFile: k}]\n" +
		"    workspaces: [{name: ci, targets: [build]}]\n" +
		"  - name: beta\n    targets: [{name: build, kind: local, workspace: b}]\n"
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(y), dir, "/home/x")
	if err != nil {
		t.Fatal(err)
	}
	acme, ok := c.Tenant("acme")
	if !ok {
		t.Fatal("acme missing")
	}
	if got, ok := acme.InScope("ci"); !ok || strings.Join(got, ",") != "build" {
		t.Errorf("ci scope = %v %v", got, ok)
	}
	if got, ok := acme.InScope(""); !ok || strings.Join(got, ",") != "build,prod" {
		t.Errorf("no-workspace scope = %v %v", got, ok)
	}
	for _, tc := range []struct{ tenant, wsp string }{{"nope", ""}, {"acme", "nope"}, {"beta", "ci"}} {
		if err := c.Exists(tc.tenant, tc.wsp); err == nil {
			t.Errorf("Exists(%q, %q) passed", tc.tenant, tc.wsp)
		}
	}
	if err := c.Exists("beta", ""); err != nil {
		t.Error(err)
	}
	if _, ok := c.Tenant(config.DefaultTenant); ok {
		t.Error("a default tenant exists beside configured tenants")
	}
	d := config.Default(filepath.Join(dir, "a"))
	tn, ok := d.Tenant(config.DefaultTenant)
	if !ok || len(tn.Targets) != 1 || tn.AllowAdHoc {
		t.Errorf("default tenant = %+v %v", tn, ok)
	}
}

func TestPolicyConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"mode", "policy: {mode: maybe}\n", `policy.mode: must be allow, deny, ask or forward (or yes, no), got "maybe"`},
		{"decision", "policy: {rules: [{command: ls, decision: sure}]}\n", `policy.rules[0].decision`},
		{"empty rule", "policy: {rules: [{decision: allow}]}\n", "policy.rules[0]: needs tool, command or both"},
		{"approver", "policy: {approvers: [slack]}\n", `policy.approvers[0]: must be dashboard or client, got "slack"`},
		{"target policy", "targets: [{name: a, kind: local, workspace: ., policy: {mode: nope}}]\n", "targets[0].policy.mode"},
		{"wait", "approvals: {waitSeconds: 400}\n", "approvals: "},
		{"forward without upstream", "policy: {mode: forward}\n", "policy.forward: is required"},
		{"forward rule without upstream", "policy: {rules: [{command: ls, decision: forward}]}\n", "policy.forward: is required"},
		{"forward over http", "policy: {mode: forward, forward: {url: 'http://parent.example/api/approvals', token: t}}\n", "policy.forward.url: must be https://"},
		{"forward loopback look-alike", "policy: {mode: forward, forward: {url: 'http://127.0.0.1.evil.example/api/approvals', token: t}}\n", "policy.forward.url: must be https://"},
		{"forward token", "policy: {mode: forward, forward: {url: 'https://parent.example/api/approvals'}}\n", "policy.forward: needs exactly one of token and tokenFile"},
		{"forward token file", "policy: {mode: forward, forward: {url: 'https://p.example/a', tokenFile: missing.token}}\n", "policy.forward.tokenFile"},
		{"jwks loopback look-alike", "auth: {issuers: [{issuer: idp, audience: me, jwksUrl: 'http://localhost.evil.example/jwks'}]}\n", "auth.issuers[0].jwksUrl: must be https://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, "/home/x")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	y := "policy: {mode: ask}\ntenants:\n" +
		"  - name: acme\n    policy: {mode: deny}\n    targets:\n" +
		"      - {name: a, kind: local, workspace: ., policy: {mode: allow}}\n" +
		"      - {name: b, kind: ssh, host: h, user: u, keyFile: k}\n" +
		"  - name: beta\n    targets: [{name: a, kind: ssh, host: h, user: u, keyFile: k}]\n"
	if err := os.WriteFile(filepath.Join(dir, "k"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse([]byte(y), dir, "/home/x")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tenant, target, want string }{{"acme", "a", "allow"}, {"acme", "b", "deny"}, {"beta", "a", "ask"}} {
		if p := c.PolicyFor(tc.tenant, tc.target); p == nil || p.Mode != tc.want {
			t.Errorf("PolicyFor(%s, %s) = %+v, want mode %s", tc.tenant, tc.target, p, tc.want)
		}
	}
	if c.Approvals.WaitSeconds != 50 || c.Approvals.TimeoutSeconds != 300 || c.Approvals.MaxRememberMinutes != 60 {
		t.Errorf("approvals defaults: %+v", c.Approvals)
	}
}

// TestForwardLoopbackSquat: a plain-http loopback upstream is accepted
// only when no session of this tandem could listen on this machine's
// loopback first; the refusal names what could.
func TestForwardLoopbackSquat(t *testing.T) {
	dir := t.TempDir()
	const fwd = "policy: {mode: forward, forward: {url: 'http://127.0.0.1:7777/api/approvals', token: t}}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"sandboxed, no network, no ad hoc", "allowAdHoc: false\ntargets: [{name: w, kind: local, workspace: .}]\n" + fwd, ""},
		// Its own network namespace (or the fallback filter): it cannot listen here.
		{"sandboxed with an allowlist", "allowAdHoc: false\ntargets: [{name: w, kind: local, workspace: ., network: {allow: [example.com]}}]\n" + fwd, ""},
		{"https with a network target", "targets: [{name: w, kind: local, workspace: ., network: true}]\n" +
			"policy: {mode: forward, forward: {url: 'https://127.0.0.1:7777/api/approvals', token: t}}\n", ""},
		{"network: true", "allowAdHoc: false\ntargets: [{name: w, kind: local, workspace: ., network: true}]\n" + fwd,
			`policy.forward.url: plain http on loopback ("http://127.0.0.1:7777/api/approvals") proves nothing of who answers, and local target "w" has network: true`},
		{"localhost too", "allowAdHoc: false\ntargets: [{name: w, kind: local, workspace: ., network: true}]\n" +
			"policy: {mode: forward, forward: {url: 'http://localhost:7777/a', token: t}}\n", `local target "w" has network: true`},
		{"unsandboxed", "allowAdHoc: false\ntargets: [{name: w, kind: local, workspace: ., sandbox: none}]\n" + fwd, `local target "w" is unsandboxed`},
		{"ssh target", "allowAdHoc: false\ntargets: [{name: s, kind: ssh, host: h, user: u, keyFile: k}]\n" + fwd, `ssh target "s"`},
		{"ad hoc by default", "targets: [{name: w, kind: local, workspace: .}]\n" + fwd, "ad-hoc SSH hosts are allowed"},
		{"a tenant's network target, a target's forward", "allowAdHoc: false\ntenants:\n" +
			"  - name: a\n    targets: [{name: w, kind: local, workspace: ., policy: {mode: forward, forward: {url: 'http://[::1]:1/a', token: t}}}]\n" +
			"  - name: b\n    targets: [{name: n, kind: local, workspace: " + t.TempDir() + ", network: true}]\n",
			`tenants[0].targets[0].policy.forward.url: plain http on loopback`},
		{"a tenant's ad hoc", "allowAdHoc: false\ntenants:\n  - name: a\n    allowAdHoc: true\n    targets: [{name: w, kind: local, workspace: .}]\n" + fwd,
			`tenant "a" allows ad-hoc SSH hosts`},
		{"caFile missing", "policy: {mode: forward, forward: {url: 'https://p.example/a', token: t, caFile: nope.pem}}\n", "policy.forward.caFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, "/home/x")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestConfigMistakes holds the mistakes a newcomer makes in tandem.yaml,
// each with the exact message tandem gives: the line, the key path as the
// README writes it, and what to write instead; never a Go type name.
func TestConfigMistakes(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(key, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := "targets:\n  - {name: s, kind: ssh, host: h, user: u, keyFile: " + key
	const creds = "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [api.test], credentials: [%s]}}\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"misspelt key", "targets:\n  - name: a\n    kind: local\n    workspce: .\n",
			"line 4: targets[0].workspce: unknown key; did you mean workspace?"},
		{"key in the wrong case", "targets:\n  - {name: a, kind: local, workspace: ., ReadOnly: []}\n",
			"line 2: targets[0].ReadOnly: unknown key; did you mean readOnly?"},
		{"unknown top-level key", "target:\n  - {name: a}\n",
			"line 1: target: unknown key; did you mean targets?"},
		{"nothing near", "zzzzzz: 1\n",
			"line 1: zzzzzz: unknown key (known here: targets, limits, allowAdHoc, web, audit, tenants, auth, policy, approvals, redact, cluster)"},
		{"yes is not a bool", "targets:\n  - {name: a, kind: local, workspace: ., network: maybe}\n",
			`line 2: targets[0].network: "maybe" is not true or false`},
		{"number as text", "targets:\n  - {name: s, kind: ssh, host: h, user: u, useAgent: true, port: twenty}\n",
			`line 2: targets[0].port: "twenty" is not a whole number`},
		{"targets not a list", "targets:\n  name: a\n  kind: local\n",
			`line 2: targets: must be a list (one "- item" per line, or [a, b]), not a block of keys`},
		{"target not a block", "targets:\n  - local\n",
			`line 2: targets[0]: must be a block of keys (name, kind, workspace, network, sandbox, readOnly, unixSockets, host, port, user, keyFile, useAgent, knownHosts, hostKeyPolicy, passwordFile, policy, redact), not the value "local"`},
		{"name is a list", "targets:\n  - name: [a, b]\n    kind: local\n    workspace: .\n",
			"line 2: targets[0].name: must be a single value, not a list"},
		{"key set twice", "limits:\n  idleTimeout: 5m\n  idleTimeout: 10m\n",
			"line 3: limits.idleTimeout: set twice (first on line 2)"},
		{"duration without unit", "limits:\n  commandTimeout: 30\n",
			`line 2: limits.commandTimeout: "30" is not a duration like 30s, 15m or 12h`},
		{"policy rules not a list", "policy:\n  mode: ask\n  rules: {command: git status}\n",
			`line 3: policy.rules: must be a list (one "- item" per line, or [a, b]), not a block of keys`},
		{"missing key file", "targets:\n  - {name: s, kind: ssh, host: h, user: u, keyFile: " + dir + "/nope}\n",
			`targets[0].keyFile: "` + dir + `/nope" does not exist`},
		{"key file is a directory", "targets:\n  - {name: s, kind: ssh, host: h, user: u, keyFile: " + dir + "}\n",
			`targets[0].keyFile: "` + dir + `" is a directory, not a file`},
		{"missing password file", "targets:\n  - {name: s, kind: ssh, host: h, user: u, passwordFile: pw}\n",
			`targets[0].passwordFile: "` + dir + `/pw" does not exist`},
		{"strict without known_hosts", ssh + ", hostKeyPolicy: strict, knownHosts: kh}\n",
			`targets[0].knownHosts: "` + dir + `/kh" does not exist, and hostKeyPolicy strict trusts only the keys it lists`},
		{"known_hosts in a missing dir", ssh + ", knownHosts: nodir/kh}\n",
			`targets[0].knownHosts: "` + dir + `/nodir/kh" does not exist, nor does its directory, where the first host key would be pinned`},
		{"unknown kind", "targets:\n  - {name: a, kind: docker}\n",
			`targets[0].kind: must be local or ssh, got "docker"`},
		{"allowlist entry", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [\"a.*.com\"]}}\n",
			`targets[0].network.allow: bad network.allow entry "a.*.com": '*' may only start an entry, as in *.example.com`},
		{"unknown preset", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [preset:cobol]}}\n",
			`targets[0].network.allow: bad network.allow entry "preset:cobol": no such preset; the presets are preset:cargo, preset:go, preset:npm, preset:pypi`},
		{"allowlist without sandbox", "targets:\n  - {name: a, kind: local, workspace: ., sandbox: none, network: {allow: [pypi.org]}}\n",
			`targets[0].network: an allowlist needs the sandbox: without it the shell could connect anywhere (remove sandbox: none, or set network: true)`},
		{"hosts not an address", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [x.test], hosts: {x.test: nowhere}}}\n",
			`targets[0].network.hosts.x.test: "nowhere" is not an IP address`},
		{"ask is not a word it knows", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [x.test], ask: maybe}}\n",
			`line 2: targets[0].network.ask: "maybe" is not true, false or forward`},
		{"ask forward without an upstream", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [x.test], ask: forward}}\n",
			`targets[0].network.ask: is forward, and the target's policy has no forward upstream: add policy.forward {url, tokenFile}, or set ask: true`},
		{"ask forward, a tenant's policy without one", "tenants:\n  - name: t\n    targets: [{name: a, kind: local, workspace: ., network: {ask: forward}}]\n",
			`tenants[0].targets[0].network.ask: is forward, and the target's policy has no forward upstream: add policy.forward {url, tokenFile}, or set ask: true`},
		{"network on an ssh target", ssh + ", network: {allow: [pypi.org]}}\n",
			`targets[0].network: applies to local targets only: tandem cannot confine a remote host's network`},
		{"credential without a secret", fmt.Sprintf(creds, `{name: gh, host: api.test, value: "Bearer {secret}"}`),
			"targets[0].network.credentials[0]: needs exactly one of secretFile (a file of the operator's) or secretEnv (a variable of tandem's own environment)"},
		{"credential value without the secret", fmt.Sprintf(creds, `{name: gh, host: api.test, value: Bearer, secretEnv: GH}`),
			`targets[0].network.credentials[0].value: must hold {secret} (e.g. "Bearer {secret}") or {USER:secret} for Basic auth ("Basic {x-access-token:secret}")`},
		{"credential header that frames the request", fmt.Sprintf(creds, `{name: gh, host: api.test, header: Content-Length, value: "{secret}", secretEnv: GH}`),
			"targets[0].network.credentials[0].header: Content-Length frames the request and cannot carry a credential"},
		{"credential host", fmt.Sprintf(creds, `{name: gh, host: "a.*.test", value: "{secret}", secretEnv: GH}`),
			`targets[0].network.credentials[0].host: bad network.allow entry "a.*.test": '*' may only start an entry, as in *.example.com`},
		{"credential secret passed to shells", fmt.Sprintf(creds, `{name: gh, host: api.test, value: "{secret}", secretEnv: PATH}`),
			"targets[0].network.credentials[0].secretEnv: PATH is passed on to local shells: a secret there would enter the session"},
		{"credential unknown key", fmt.Sprintf(creds, `{name: gh, host: api.test, value: "{secret}", secretEnv: GH, token: x}`),
			"line 2: targets[0].network.credentials[0].token: unknown key (known here: name, host, path, header, value, secretFile, secretEnv, replace, caFile)"},
		{"allow entry with a lower-case method", "targets:\n  - {name: a, kind: local, workspace: ., network: {allow: [{host: api.test, methods: [get]}]}}\n",
			`targets[0].network.allow: bad network.allow entry "api.test": method "get" is not an upper-case HTTP method name such as GET`},
		{"no ssh credentials", "targets:\n  - {name: s, kind: ssh, host: h, user: u}\n",
			"targets[0]: needs keyFile, useAgent: true or passwordFile (passwords are not written in tandem.yaml)"},
		{"redact env name", "redact:\n  env: [GITHUB_TOKEN, \"A=B\"]\n",
			`redact.env[1]: "A=B" is not an environment variable name (letters, digits and _, not starting with a digit)`},
		{"redact home of another user", "targets:\n  - {name: a, kind: local, workspace: ., redact: {secretFiles: [\"~bob/.env\"]}}\n",
			`targets[0].redact.secretFiles[0]: only ~/ is expanded, not ~user/: "~bob/.env"`},
		{"redact switch not a bool", "redact:\n  viewers: sometimes\n",
			`line 2: redact.viewers: "sometimes" is not true or false`},
		{"redact unknown key", "redact:\n  secretFile: [.env]\n",
			"line 2: redact.secretFile: unknown key; did you mean secretFiles?"},
		{"redact raw key missing", "redact: {rawKey: nope.pub}\n",
			"redact.rawKey: open " + dir + "/nope.pub: no such file or directory"},
		{"redact raw key not a key", "redact: {rawKey: " + key + "}\n",
			"redact.rawKey: " + key + ": not a key: want 32 bytes in base64 on one line (tandem audit raw-keys writes them)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml), dir, dir)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got  %v\nwant %s", err, tc.want)
			}
			if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "!!") {
				t.Errorf("the message speaks Go or YAML internals: %v", err)
			}
		})
	}
	// A missing known_hosts under accept-new is fine: the first pin creates it.
	if _, err := config.Parse([]byte(ssh+", knownHosts: kh}\n"), dir, dir); err != nil {
		t.Errorf("accept-new with a known_hosts still to be created: %v", err)
	}
}

// TestWorkspaceOverlapThroughSymlink: overlap between tenants' workspaces
// is judged on the directories the paths resolve to, so a symlink cannot
// hand one tenant's sandbox grant a way into another's files.
func TestWorkspaceOverlapThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"a/inner", "c"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{
		"same": "a", "into": "a/inner", "parent": ".", "sibling": "c",
	} {
		if err := os.Symlink(filepath.Join(dir, to), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, t1, t2 string
		overlap      bool
	}{
		{"link to the same directory", "a", "same", true},
		{"link into the other workspace", "a", "into", true},
		{"path through a link", "a", "same/inner", true},
		{"link to a parent", "a/inner", "parent", true},
		{"the other way round", "same", "a/inner", true},
		{"both through links", "same", "into", true},
		{"a root not made yet, under a link", "a", "same/later", true},
		{"link to a separate directory", "a", "sibling", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := "tenants:\n  - {name: t1, targets: [{name: x, kind: local, workspace: " + tc.t1 + "}]}\n" +
				"  - {name: t2, targets: [{name: x, kind: local, workspace: " + tc.t2 + "}]}\n"
			_, err := config.Parse([]byte(y), dir, "/home/x")
			if !tc.overlap {
				if err != nil {
					t.Fatalf("separate directories refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s and %s overlap through a symlink, but the config was accepted", tc.t1, tc.t2)
			}
			for _, want := range []string{`tenant "t1"`, `tenant "t2"`, filepath.Join(dir, tc.t1), filepath.Join(dir, tc.t2), "tenants[1].targets[0].workspace"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// TestRedactFor: the redact sections of the top level, the tenant and the
// target add up (files and names), the most specific switch set wins, and
// "~/" is expanded while a relative path stays as written (it is read in
// the session's workspace).
func TestRedactFor(t *testing.T) {
	dir := t.TempDir()
	yaml := `redact:
  secretFiles: [.env, ~/.aws/credentials]
  env: [TOP]
  viewers: true
tenants:
  - name: acme
    redact: {env: [TENANT], patterns: false}
    targets:
      - name: dev
        kind: local
        workspace: ` + dir + `
        redact: {secretFiles: [/etc/app.env], viewers: false, patterns: true}
      - name: ci
        kind: local
        workspace: ` + dir + `
`
	c, err := config.Parse([]byte(yaml), dir, "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	on, off := true, false
	tests := []struct {
		tenant, target string
		want           config.Redact
	}{
		{"acme", "dev", config.Redact{SecretFiles: []string{".env", "/home/u/.aws/credentials", "/etc/app.env"},
			Env: []string{"TOP", "TENANT"}, Patterns: &on, Viewers: &off}},
		{"acme", "ci", config.Redact{SecretFiles: []string{".env", "/home/u/.aws/credentials"},
			Env: []string{"TOP", "TENANT"}, Patterns: &off, Viewers: &on}},
		{"acme", "", config.Redact{SecretFiles: []string{".env", "/home/u/.aws/credentials"},
			Env: []string{"TOP", "TENANT"}, Patterns: &off, Viewers: &on}},
		{"nobody", "dev", config.Redact{SecretFiles: []string{".env", "/home/u/.aws/credentials"},
			Env: []string{"TOP"}, Viewers: &on}},
	}
	for _, tc := range tests {
		t.Run(tc.tenant+"/"+tc.target, func(t *testing.T) {
			got := c.RedactFor(tc.tenant, tc.target)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("RedactFor = %s, want %s", show(got), show(tc.want))
			}
		})
	}
}

func show(r config.Redact) string {
	b := func(p *bool) string {
		if p == nil {
			return "unset"
		}
		return strconv.FormatBool(*p)
	}
	return fmt.Sprintf("{files %q env %q patterns %s entropy %s viewers %s}", r.SecretFiles, r.Env, b(r.Patterns), b(r.Entropy), b(r.Viewers))
}

// TestAllMistakesInOneRun: a file with mistakes of every kind lists them
// all at once: those of shape (an unknown key, a word where a number
// goes, a bad duration) do not hide those found after decoding (a port
// out of range, a missing key file, a bad policy decision), and a key cut
// out for a mistake is not reported twice.
func TestAllMistakesInOneRun(t *testing.T) {
	dir := t.TempDir()
	yaml := `targets:
  - name: app
    kind: local
    workspce: .
  - name: db
    kind: ssh
    host: db.internal
    user: deploy
    port: twenty
    useAgent: true
  - name: web
    kind: ssh
    host: web.internal
    user: deploy
    port: 70000
    keyFile: ` + dir + `/nope
limits:
  idleTimeout: soon
policy:
  mode: ask
  rules:
    - {command: "git push*", decision: maybe}
`
	_, err := config.Parse([]byte(yaml), dir, dir)
	if err == nil {
		t.Fatal("a config with six mistakes loaded")
	}
	want := []string{
		"line 4: targets[0].workspce: unknown key; did you mean workspace?",
		`line 9: targets[1].port: "twenty" is not a whole number`,
		`line 18: limits.idleTimeout: "soon" is not a duration like 30s, 15m or 12h`,
		"targets[2].port: must be 1-65535, got 70000",
		`targets[2].keyFile: "` + dir + `/nope" does not exist`,
		`policy.rules[0].decision: must be allow, deny, ask or forward (or yes, no), got "maybe"`,
	}
	got := strings.Split(err.Error(), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d errors:\n%s\nwant %d:\n%s", len(got), err, len(want), strings.Join(want, "\n"))
	}
}

// TestLoadWorkspace: --workspace with --config names the workspace of
// the file's one local target; a file with none or several is refused,
// saying which flag to drop.
func TestLoadWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "project")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml, want string // want "" means it loads
	}{
		{"one local target", "targets:\n  - {name: app, kind: local, workspace: /nope/written}\n", ""},
		{"one local target without a workspace", "targets:\n  - {name: app, kind: local}\n", ""},
		{"a tenant's one local target", "tenants:\n  - name: t\n    targets: [{name: app, kind: local, workspace: /nope}]\n", ""},
		{"no local target", "targets:\n  - {name: s, kind: ssh, host: h, user: u, useAgent: true}\n",
			"--workspace names the workspace of the file's local target, and this file has none: drop --workspace, or add a target with kind: local"},
		{"two local targets", "targets:\n  - {name: a, kind: local, workspace: .}\n  - {name: b, kind: local, workspace: .}\n",
			"--workspace names the workspace of the file's one local target, and this file has 2 (a, b): drop --workspace and set workspace on each of them in the file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("tandem%d.yaml", i))
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := config.LoadWorkspace(path, dir, ws)
			if tc.want != "" {
				if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
					t.Fatalf("got %v, want an error ending %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var locals []config.Target
			for _, tn := range append([]config.Tenant{{Targets: c.Targets}}, c.Tenants...) {
				for _, tt := range tn.Targets {
					if tt.Kind == "local" {
						locals = append(locals, tt)
					}
				}
			}
			if len(locals) != 1 || locals[0].Workspace != ws {
				t.Fatalf("local targets %+v, want one with workspace %s", locals, ws)
			}
		})
	}
}

func TestNetworkCredentials(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	y := "targets:\n  - name: a\n    kind: local\n    workspace: ws\n    network:\n      allow:\n        - registry.test\n" +
		"        - {host: api.test, methods: [GET, HEAD], paths: [\"/repos/acme/*\"]}\n" +
		"      credentials:\n        - {name: api, host: api.test, value: \"Bearer {secret}\", secretFile: token}\n" +
		"        - {name: forge, host: git.test, path: /acme/, header: PRIVATE-TOKEN, value: \"{secret}\", secretEnv: FORGE_TOKEN, replace: true}\n"
	c, err := config.Parse([]byte(y), dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	n := c.Targets[0].Network
	if !n.Proxied() || len(n.Allow) != 2 || n.Allow[1].Host != "api.test" || len(n.Allow[1].Methods) != 2 || n.Allow[1].Paths[0] != "/repos/acme/*" {
		t.Fatalf("allow %+v", n.Allow)
	}
	if len(n.Credentials) != 2 || n.Credentials[0].SecretFile != secret || n.Credentials[0].Header != "Authorization" ||
		n.Credentials[1].Header != "PRIVATE-TOKEN" || !n.Credentials[1].Replace {
		t.Fatalf("credentials %+v", n.Credentials)
	}
	for _, tc := range []struct{ tmpl, want string }{
		{"Bearer {secret}", "Bearer s3"},
		{"Basic {x-access-token:secret}", "Basic eC1hY2Nlc3MtdG9rZW46czM="},
		{"{secret}", "s3"},
	} {
		if got := config.CredentialValue(tc.tmpl, "s3"); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.tmpl, got, tc.want)
		}
	}
}
