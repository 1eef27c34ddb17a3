package testenv_test

import (
	"bytes"
	"encoding/json"
	"errors"
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

// TestGoProxy has the real go command download from GoProxy, a module
// with an upper-case letter in its path included, and list its versions.
func TestGoProxy(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "testenv: go not found on PATH: %v", err)
	}
	reg := testenv.GoProxy(t,
		testenv.GoModule{Path: "example.com/hello", Version: "v1.1.0", Files: map[string]string{
			"hello.go": "package hello\n\nconst Greeting = \"old\"\n",
		}},
		testenv.GoModule{Path: "example.com/hello", Version: "v1.2.0", Files: map[string]string{
			"hello.go": "package hello\n\nconst Greeting = \"hello from the proxy\"\n",
		}},
		testenv.GoModule{Path: "example.com/Upper/Case", Version: "v0.1.0", Files: map[string]string{
			"go.mod":       "module example.com/Upper/Case\n\ngo 1.22\n",
			"sub/thing.go": "package sub\n\nconst Thing = 42\n",
		}},
	)

	dir := t.TempDir()
	modcache := filepath.Join(dir, "modcache")
	// Telemetry off: otherwise the go command forks a detached telemetry
	// process that outlives the test and writes into HOME after cleanup.
	home := filepath.Join(dir, "home")
	writeTestFile(t, filepath.Join(home, ".config", "go", "telemetry", "mode"), "off\n")
	env := goEnv(home,
		"GOPROXY="+reg.URL, "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOENV=off",
		"GOMODCACHE="+modcache, "GOPATH="+filepath.Join(dir, "gopath"), "GOCACHE="+filepath.Join(dir, "gocache"))
	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = filepath.Join(dir, "work"), env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, errors.New(err.Error() + ": " + stderr.String())
		}
		return out, nil
	}
	writeTestFile(t, filepath.Join(dir, "work", "go.mod"), "module example.com/work\n\ngo 1.21\n\n"+
		"require (\n\texample.com/hello v1.2.0\n\texample.com/Upper/Case v0.1.0\n)\n")
	// The module cache is read-only; t.TempDir cannot remove it alone.
	t.Cleanup(func() {
		if _, err := goCmd("clean", "-modcache"); err != nil {
			t.Errorf("go clean -modcache: %v", err)
		}
	})

	out, err := goCmd("mod", "download", "-json", "example.com/hello@v1.2.0", "example.com/Upper/Case@v0.1.0")
	if err != nil {
		t.Fatalf("go mod download: %v\nstdout: %s\nrequests: %q", err, out, reg.Requests())
	}
	got := map[string]string{} // module path → Dir
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var m struct{ Path, Version, Error, Dir string }
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go mod download -json: %v\n%s", err, out)
		}
		if m.Error != "" {
			t.Fatalf("go mod download %s@%s: %s", m.Path, m.Version, m.Error)
		}
		got[m.Path] = m.Dir
	}
	for _, c := range []struct{ mod, file, want string }{
		{"example.com/hello", "hello.go", "hello from the proxy"},
		{"example.com/Upper/Case", "sub/thing.go", "Thing = 42"},
		{"example.com/Upper/Case", "go.mod", "go 1.22"},
	} {
		b, err := os.ReadFile(filepath.Join(got[c.mod], c.file))
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %s = %q, %v; want it to contain %q", c.mod, c.file, b, err, c.want)
		}
	}
	if want := filepath.Join(modcache, "example.com", "!upper", "!case@v0.1.0"); got["example.com/Upper/Case"] != want {
		t.Errorf("Upper/Case extracted to %q, want %q", got["example.com/Upper/Case"], want)
	}

	out, err = goCmd("list", "-m", "-versions", "example.com/hello")
	if err != nil {
		t.Fatalf("go list -m -versions: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "example.com/hello v1.1.0 v1.2.0"; got != want {
		t.Errorf("go list -m -versions = %q, want %q", got, want)
	}

	reqs := reg.Requests()
	for _, p := range []string{"/example.com/hello/@v/v1.2.0.zip", "/example.com/!upper/!case/@v/v0.1.0.zip", "/example.com/hello/@v/list"} {
		if !slices.Contains(reqs, p) {
			t.Errorf("no request for %s; requests: %q", p, reqs)
		}
	}
}

// TestGoProxyProtocol checks the answers the go command above did not
// need: @latest, and 404 for what is not served or not escaped.
func TestGoProxyProtocol(t *testing.T) {
	reg := testenv.GoProxy(t,
		testenv.GoModule{Path: "example.com/m", Version: "v1.0.0"},
		testenv.GoModule{Path: "example.com/m", Version: "v1.10.0"},
		testenv.GoModule{Path: "example.com/m", Version: "v1.9.0"},
		testenv.GoModule{Path: "example.com/m", Version: "v2.0.0-rc.1"},
		testenv.GoModule{Path: "example.com/pre", Version: "v0.1.0-alpha"},
		testenv.GoModule{Path: "example.com/pre", Version: "v0.1.0-beta.2"},
		testenv.GoModule{Path: "example.com/pre", Version: "v0.1.0-beta.11"},
		testenv.GoModule{Path: "example.com/Big", Version: "v1.0.0"},
	)
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/example.com/m/@latest", 200, `"Version":"v1.10.0"`},
		{"/example.com/pre/@latest", 200, `"Version":"v0.1.0-beta.11"`},
		{"/example.com/m/@v/list", 200, "v1.0.0\nv1.9.0\nv1.10.0\nv2.0.0-rc.1\n"},
		{"/example.com/m/@v/v1.9.0.info", 200, `"Time":"2024-01-01T00:00:00Z"`},
		{"/example.com/m/@v/v1.9.0.mod", 200, "module example.com/m\n"},
		{"/example.com/!big/@v/v1.0.0.mod", 200, "module example.com/Big\n"},
		{"/example.com/Big/@v/v1.0.0.mod", 404, ""},
		{"/example.com/m/@v/v1.2.3.info", 404, ""},
		{"/example.com/other/@v/list", 404, ""},
		{"/example.com/m", 404, ""},
	} {
		resp, err := http.Get(reg.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(string(body), c.body) {
			t.Errorf("GET %s = %d %q, want %d containing %q", c.path, resp.StatusCode, body, c.code, c.body)
		}
	}
	if n := len(reg.Requests()); n != 10 {
		t.Errorf("Requests() has %d entries, want 10", n)
	}
}

// goEnv is the environment for the go command: this process's, minus
// every setting that could send it elsewhere than the test registry
// (proxies, GOPRIVATE and the like, a user go.env), plus set.
func goEnv(home string, set ...string) []string {
	env := hermeticEnv(func(k string) bool {
		return strings.HasPrefix(k, "GO") || strings.HasPrefix(k, "CGO_")
	})
	return append(env, append([]string{"HOME=" + home}, set...)...)
}

// hermeticEnv copies os.Environ without proxy settings, the XDG
// directories (which would lead to the user's configuration) and the
// variables drop matches.
func hermeticEnv(drop func(key string) bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		lk := strings.ToLower(k)
		if strings.HasSuffix(lk, "_proxy") || strings.HasPrefix(k, "XDG_") || k == "HOME" || drop(k) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func writeTestFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
