package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tandem-sh/tandem/internal/config"
	"github.com/tandem-sh/tandem/internal/seal"
)

// readmeBlock is one fenced code block of the README or a page of docs/.
type readmeBlock struct {
	lang, text string
	file       string // README.md or docs/NAME.md
	line       int
}

// where names a block's place for an error message.
func (b readmeBlock) where() string { return b.file + " line " + strconv.Itoa(b.line) }

// docFiles are the README and every page under docs/, relative to the
// repository's root: the tests below hold each of them to the code.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("docs/ has %d pages; the reference moved somewhere else?", len(pages))
	}
	files := []string{"README.md"}
	for _, p := range pages {
		files = append(files, filepath.ToSlash(filepath.Join("docs", filepath.Base(p))))
	}
	return files
}

// readmeBlocks returns the README's fenced blocks.
func readmeBlocks(t *testing.T) []readmeBlock { return fileBlocks(t, "README.md") }

// fileBlocks returns the fenced blocks of one doc file, indented ones
// (inside a list item) included, with their indentation removed.
func fileBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", file))
	if err != nil {
		t.Fatal(err)
	}
	open := regexp.MustCompile("^( *)```(\\w*)$")
	var out []readmeBlock
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		m := open.FindStringSubmatch(lines[i])
		if m == nil || m[2] == "" {
			continue
		}
		indent, blk := m[1], readmeBlock{lang: m[2], file: file, line: i + 1}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		blk.text = strings.Join(body, "\n") + "\n"
		out = append(out, blk)
	}
	return out
}

// pathKeys are the config keys whose values name files or directories
// that must exist when tandem loads the config.
var pathKeys = map[string]bool{
	"workspace": true, "readOnly": true, "keyFile": true, "passwordFile": true, "knownHosts": true,
	"caFile": true, "secretFile": true, "signingKey": true, "tokenFile": true, "operatorTokenFile": true,
	"rawKey": true,
}

// TestREADMEConfigsLoad: every YAML block of the README and of docs/
// loads with config.Load exactly as written, only with the files it names
// created under a scratch root (so /etc/tandem/x is root/etc/tandem/x and
// ~ is a scratch home); a fragment says so on its first line. Every JSON
// block (client configs, example calls and replies) parses, and a stdio
// entry's args are flags tandem serve knows.
func TestREADMEConfigsLoad(t *testing.T) {
	var yamls, jsons int
	for _, file := range docFiles(t) {
		for _, b := range fileBlocks(t, file) {
			switch b.lang {
			case "yaml":
				yamls++
				t.Run(b.where(), func(t *testing.T) { loadREADMEConfig(t, b.text) })
			case "json":
				jsons++
				var v map[string]any
				if err := json.Unmarshal([]byte(b.text), &v); err != nil {
					t.Errorf("%s: the JSON block does not parse: %v", b.where(), err)
					continue
				}
				switch {
				case v["arguments"] != nil:
					checkToolCall(t, b.where(), v)
				case v["success"] != nil:
					if _, ok := v["success"].(bool); !ok {
						t.Errorf("%s: a reply whose success is not a boolean: %v", b.where(), v)
					}
				default:
					checkClientConfig(t, b.where(), v)
				}
			}
		}
	}
	if yamls < 12 || jsons < 7 {
		t.Fatalf("found %d YAML and %d JSON blocks in the README and docs/; the extractor lost some", yamls, jsons)
	}
}

// loadREADMEConfig writes text as a tandem.yaml whose paths live under a
// scratch root, creates what they name, and loads it.
func loadREADMEConfig(t *testing.T, text string) {
	p, home := materializeConfig(t, text)
	if _, err := config.Load(p, home); err != nil {
		t.Fatalf("the README's config does not load as written: %v\n%s", err, text)
	}
}

// writeREADMEConfig is materializeConfig's file, for a tandem to serve.
func writeREADMEConfig(t *testing.T, text string) string {
	p, _ := materializeConfig(t, text)
	return p
}

// materializeConfig writes text as root/etc/tandem/tandem.yaml, with the
// files and directories it names created under the scratch root, and
// returns the file and the scratch home.
func materializeConfig(t *testing.T, text string) (path, scratchHome string) {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home", "you")
	cfgDir := filepath.Join(root, "etc", "tandem")
	for _, d := range []string{home, cfgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, text)
	}
	if len(doc.Content) == 0 {
		t.Fatal("an empty block")
	}
	if first := strings.SplitN(text, "\n", 2)[0]; strings.HasPrefix(first, "# a fragment") {
		t.Logf("a fragment: %s", first)
	}
	var walk func(n *yaml.Node, key string)
	walk = func(n *yaml.Node, key string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], n.Content[i].Value)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, key)
			}
		case yaml.ScalarNode:
			if pathKeys[key] && n.Value != "" {
				n.Value = materialize(t, key, n.Value, root, home, cfgDir)
			}
		}
	}
	walk(doc.Content[0], "")
	out, err := yaml.Marshal(doc.Content[0])
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(cfgDir, "tandem.yaml")
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, home
}

// materialize creates what a config value names under the scratch root
// and returns the value to write: ~/ stays (home is the scratch home),
// a relative path stays (relative to the config's directory), an
// absolute one moves under root.
func materialize(t *testing.T, key, v, root, home, cfgDir string) string {
	t.Helper()
	var path string
	switch {
	case strings.HasPrefix(v, "~/"):
		path = filepath.Join(home, v[2:])
	case filepath.IsAbs(v):
		path = filepath.Join(root, v)
		v = path
	default:
		path = filepath.Join(cfgDir, v)
	}
	if key == "workspace" {
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var content []byte
	switch key {
	case "caFile":
		content = testCAPEM(t)
	case "secretFile":
		content = []byte(strings.Repeat("0123456789abcdef", 4) + "\n")
	case "tokenFile", "operatorTokenFile":
		content = []byte(strings.Repeat("ab12", 16) + "\n")
	case "knownHosts", "readOnly":
		content = []byte("\n")
	case "rawKey":
		pub, _, err := seal.NewKeys()
		if err != nil {
			t.Fatal(err)
		}
		content = []byte(pub.String() + "\n")
	default:
		content = []byte("secret\n")
	}
	if _, err := os.Stat(path); err != nil {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// testCAPEM is a throwaway CA certificate in PEM.
func testCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "readme ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// checkClientConfig checks one client config of the README: each server
// either runs tandem serve with flags it knows, or names an HTTP URL.
// checkToolCall checks an example call: a tool of the README's tools
// table, with arguments as an object.
func checkToolCall(t *testing.T, where string, v map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	name, _ := v["name"].(string)
	if _, ok := v["arguments"].(map[string]any); !ok || name == "" || !strings.Contains(string(b), "\n| `"+name+"` |") {
		t.Errorf("%s: an example call of a tool the tools table does not list, or without arguments: %v", where, v)
	}
}

func checkClientConfig(t *testing.T, where string, v map[string]any) {
	t.Helper()
	servers, _ := v["mcpServers"].(map[string]any)
	if servers == nil {
		servers, _ = v["servers"].(map[string]any)
	}
	if len(servers) == 0 {
		t.Errorf("%s: a client config with no servers: %v", where, v)
		return
	}
	for name, raw := range servers {
		srv, _ := raw.(map[string]any)
		if u, ok := srv["url"].(string); ok {
			if !strings.HasSuffix(u, "/mcp") {
				t.Errorf("%s: server %s: the URL %q is not an MCP endpoint", where, name, u)
			}
			continue
		}
		args, _ := srv["args"].([]any)
		if len(args) == 0 || args[0] != "serve" {
			t.Errorf("%s: server %s does not run tandem serve: %v", where, name, srv)
			continue
		}
		var flags []string
		for _, a := range args[1:] {
			flags = append(flags, a.(string))
		}
		cmd := serveCmd(nil, nil, nil)
		if err := cmd.ParseFlags(flags); err != nil {
			t.Errorf("%s: server %s: tandem serve %v: %v", where, name, flags, err)
		}
	}
}
