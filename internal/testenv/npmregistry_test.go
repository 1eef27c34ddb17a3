package testenv_test

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestNPMRegistry has the real npm install from NPMRegistry: the latest
// version, a pinned one, and a scoped package with a dependency, each
// then loaded by node.
func TestNPMRegistry(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		testenv.Missing(t, "testenv: npm not found on PATH: %v", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "testenv: node not found on PATH: %v", err)
	}
	reg := testenv.NPMRegistry(t,
		testenv.NPMPackage{Name: "tandem-pad", Version: "1.0.0", Files: map[string]string{
			"index.js": "module.exports = 'pad 1.0.0';\n",
		}},
		testenv.NPMPackage{Name: "tandem-pad", Version: "1.1.0", Files: map[string]string{
			"index.js": "module.exports = 'pad 1.1.0';\n",
		}},
		testenv.NPMPackage{Name: "tandem-pad", Version: "2.0.0-beta.1", Files: map[string]string{
			"index.js": "module.exports = 'pad beta';\n",
		}},
		testenv.NPMPackage{Name: "@tandem/scoped", Version: "3.0.0", Files: map[string]string{
			"package.json": `{"name": "@tandem/scoped", "version": "3.0.0", "main": "lib/main.js",
				"dependencies": {"tandem-pad": "^1.0.0"}}`,
			"lib/main.js": "module.exports = 'scoped, with ' + require('tandem-pad');\n",
		}},
	)
	for _, c := range []struct {
		spec, pkg, want string // what to install, then require
		tarball         string // a request it must make
	}{
		{"tandem-pad", "tandem-pad", "pad 1.1.0", "/tandem-pad/-/tandem-pad-1.1.0.tgz"},
		{"tandem-pad@1.0.0", "tandem-pad", "pad 1.0.0", "/tandem-pad/-/tandem-pad-1.0.0.tgz"},
		{"@tandem/scoped", "@tandem/scoped", "scoped, with pad 1.1.0", "/@tandem/scoped/-/scoped-3.0.0.tgz"},
	} {
		t.Run(c.spec, func(t *testing.T) {
			dir := t.TempDir()
			// Empty configurations, one file each: npm refuses to load
			// the same file as both.
			userconfig, globalconfig := filepath.Join(dir, "npmrc"), filepath.Join(dir, "global-npmrc")
			writeTestFile(t, userconfig, "")
			writeTestFile(t, globalconfig, "")
			writeTestFile(t, filepath.Join(dir, "project", "package.json"), "{}\n")
			env := append(hermeticEnv(func(k string) bool { return strings.HasPrefix(strings.ToLower(k), "npm_config_") }),
				"HOME="+dir, "npm_config_userconfig="+userconfig, "npm_config_globalconfig="+globalconfig)
			run := func(name string, args ...string) string {
				t.Helper()
				cmd := exec.Command(name, args...)
				cmd.Dir, cmd.Env = filepath.Join(dir, "project"), env
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s\nrequests: %q", name, args, err, out, stderr.Bytes(), reg.Requests())
				}
				return string(out)
			}
			run(npm, "install", "--registry", reg.URL+"/", "--no-audit", "--no-fund", "--no-update-notifier",
				"--cache", filepath.Join(dir, "cache"), c.spec)

			var pj struct{ Name, Version string }
			b, err := os.ReadFile(filepath.Join(dir, "project", "node_modules", c.pkg, "package.json"))
			if err == nil {
				err = json.Unmarshal(b, &pj)
			}
			if err != nil || pj.Name != c.pkg {
				t.Errorf("node_modules/%s/package.json: %s, %v", c.pkg, b, err)
			}
			if got := run(node, "-p", "require('"+c.pkg+"')"); strings.TrimSpace(got) != c.want {
				t.Errorf("require(%q) = %q, want %q", c.pkg, got, c.want)
			}
			if reqs := reg.Requests(); !slices.Contains(reqs, c.tarball) {
				t.Errorf("no request for %s; requests: %q", c.tarball, reqs)
			}
		})
	}
}

// TestNPMRegistryPackument checks the packument itself: tarball URLs on
// the Host the request named, the checksums npm verifies, dist-tags, and
// both spellings of a scoped name.
func TestNPMRegistryPackument(t *testing.T) {
	reg := testenv.NPMRegistry(t,
		testenv.NPMPackage{Name: "plain", Version: "0.2.0", Files: map[string]string{"a.txt": "a"}},
		testenv.NPMPackage{Name: "plain", Version: "0.10.0"},
		testenv.NPMPackage{Name: "@s/p", Version: "1.0.0-rc.1"},
	)
	get := func(path, host string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", reg.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	type packument struct {
		Name     string
		DistTags map[string]string `json:"dist-tags"`
		Versions map[string]struct {
			Name, Version string
			Dist          struct{ Tarball, Shasum, Integrity string }
		}
	}
	code, b := get("/plain", "registry.test:4873")
	var doc packument
	if err := json.Unmarshal(b, &doc); code != 200 || err != nil {
		t.Fatalf("GET /plain = %d %s (%v)", code, b, err)
	}
	if doc.Name != "plain" || doc.DistTags["latest"] != "0.10.0" || len(doc.Versions) != 2 {
		t.Errorf("packument: %s", b)
	}
	dist := doc.Versions["0.2.0"].Dist
	if want := "http://registry.test:4873/plain/-/plain-0.2.0.tgz"; dist.Tarball != want {
		t.Errorf("tarball = %q, want %q", dist.Tarball, want)
	}
	code, tgz := get(strings.TrimPrefix(dist.Tarball, "http://registry.test:4873"), "")
	if code != 200 {
		t.Fatalf("GET tarball = %d %s", code, tgz)
	}
	sha1Sum, sha512Sum := sha1.Sum(tgz), sha512.Sum512(tgz)
	if dist.Shasum != hex.EncodeToString(sha1Sum[:]) ||
		dist.Integrity != "sha512-"+base64.StdEncoding.EncodeToString(sha512Sum[:]) {
		t.Errorf("dist %+v does not match the tarball", dist)
	}

	for _, p := range []string{"/@s%2fp", "/@s/p"} {
		code, b := get(p, "")
		var doc packument
		if err := json.Unmarshal(b, &doc); code != 200 || err != nil || doc.DistTags["latest"] != "1.0.0-rc.1" ||
			doc.Versions["1.0.0-rc.1"].Dist.Tarball != reg.URL+"/@s/p/-/p-1.0.0-rc.1.tgz" {
			t.Errorf("GET %s = %d %s", p, code, b)
		}
	}
	for _, p := range []string{"/nope", "/plain/-/plain-9.9.9.tgz", "/@s%2fq"} {
		if code, b := get(p, ""); code != 404 {
			t.Errorf("GET %s = %d %s, want 404", p, code, b)
		}
	}
}
