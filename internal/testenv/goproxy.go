package testenv

import (
	"archive/zip"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry is a package registry served over plain HTTP on loopback for
// one test, so the real package managers (the go command, npm) can
// download from it with no internet access. [GoProxy] and [NPMRegistry]
// start one; it stops at t's cleanup.
type Registry struct {
	URL  string // "http://127.0.0.1:PORT", without a trailing slash
	Host string // "127.0.0.1"
	Port int

	mu       sync.Mutex
	requests []string
}

// Requests lists the path of every request served so far (decoded, so
// npm's "/@scope%2fname" reads "/@scope/name"), in arrival order and
// once per request, including the ones answered 404. A test asserts with
// it that a download went through this registry and not a cache.
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// serveRegistry serves h on 127.0.0.1:0 until t's cleanup, recording
// each request's path. Registries are read-only: other methods than GET
// and HEAD are refused.
func serveRegistry(t testing.TB, h http.Handler) *Registry {
	t.Helper()
	reg := &Registry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.mu.Lock()
		reg.requests = append(reg.requests, r.URL.Path)
		reg.mu.Unlock()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read-only registry", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().(*net.TCPAddr)
	reg.URL, reg.Host, reg.Port = srv.URL, addr.IP.String(), addr.Port
	return reg
}

// GoModule is one version of a Go module that [GoProxy] serves.
type GoModule struct {
	Path    string // module path, as in go.mod: "example.com/Foo/bar"
	Version string // canonical semantic version: "v1.2.3", "v0.1.0-rc.1"
	// Files maps a slash-separated name relative to the module root to
	// its content. Without a "go.mod" entry, one declaring Path and
	// go 1.21 is added, in the zip and as the .mod answer alike.
	Files map[string]string
}

// goModTime is the commit time every served version reports: the go
// command wants one, and tests want answers that do not change.
var goModTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// GoProxy serves mods for t by the GOPROXY protocol
// (https://go.dev/ref/mod#goproxy-protocol) over plain HTTP, so a test
// sets GOPROXY=reg.URL and GOSUMDB=off and runs the real go command.
// Module paths and versions are escaped in URLs as the protocol says (an
// upper-case letter is "!" and its lower case). Anything unknown answers
// 404, which the go command reads as "no such module or version".
// A malformed module fails t at once.
func GoProxy(t testing.TB, mods ...GoModule) *Registry {
	t.Helper()
	files := map[string][]byte{}      // escaped URL path without "/" → body
	versions := map[string][]string{} // escaped module path → versions
	for _, m := range mods {
		if err := checkGoModule(m); err != nil {
			t.Fatalf("testenv: GoProxy: %s@%s: %v", m.Path, m.Version, err)
		}
		escPath, escVersion := escapeGoPath(m.Path), escapeGoPath(m.Version)
		base := escPath + "/@v/" + escVersion
		if _, dup := files[base+".info"]; dup {
			t.Fatalf("testenv: GoProxy: %s@%s given twice", m.Path, m.Version)
		}
		src := maps.Clone(m.Files)
		if src == nil {
			src = map[string]string{}
		}
		if _, ok := src["go.mod"]; !ok {
			src["go.mod"] = "module " + m.Path + "\n\ngo 1.21\n"
		}
		zipped, err := goModuleZip(m.Path+"@"+m.Version, src)
		if err != nil {
			t.Fatalf("testenv: GoProxy: %s@%s: %v", m.Path, m.Version, err)
		}
		files[base+".info"] = goInfo(m.Version)
		files[base+".mod"] = []byte(src["go.mod"])
		files[base+".zip"] = zipped
		versions[escPath] = append(versions[escPath], m.Version)
	}
	for p, vs := range versions {
		slices.SortFunc(vs, compareSemver)
		files[p+"/@v/list"] = []byte(strings.Join(vs, "\n") + "\n")
		files[p+"/@latest"] = goInfo(latestVersion(vs))
	}
	return serveRegistry(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.Error(w, "not found: "+r.URL.Path, http.StatusNotFound)
			return
		}
		ct := "text/plain; charset=utf-8" // list and .mod
		switch p := r.URL.Path; {
		case strings.HasSuffix(p, ".zip"):
			ct = "application/zip"
		case strings.HasSuffix(p, ".info"), strings.HasSuffix(p, "/@latest"):
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
}

// checkGoModule rejects what the go command would refuse later with a
// less helpful message.
func checkGoModule(m GoModule) error {
	if m.Path == "" || strings.ContainsAny(m.Path, "@!\\ ") || !fs.ValidPath(m.Path) {
		return fmt.Errorf("invalid module path %q", m.Path)
	}
	if !strings.HasPrefix(m.Version, "v") || !validSemver(m.Version[1:]) {
		return fmt.Errorf("version %q is not canonical semver (vMAJOR.MINOR.PATCH)", m.Version)
	}
	for name := range m.Files {
		if !fs.ValidPath(name) || name == "." || strings.Contains(name, "\\") {
			return fmt.Errorf("invalid file name %q", name)
		}
	}
	return nil
}

// goInfo is the .info (and @latest) answer for version.
func goInfo(version string) []byte {
	b, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, goModTime})
	return b
}

// goModuleZip writes files in the layout the go command requires of a
// module zip: every file under "path@version/", no directory entries.
// The prefix keeps the module path's case; only URLs are escaped.
func goModuleZip(prefix string, files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		w, err := zw.CreateHeader(&zip.FileHeader{
			Name: prefix + "/" + name, Method: zip.Deflate, Modified: goModTime,
		})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// escapeGoPath escapes a module path or version for a GOPROXY URL: each
// upper-case letter becomes "!" and its lower case, so that the URL means
// the same on case-insensitive file systems.
func escapeGoPath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// validSemver reports whether v (without any "v" prefix) is
// MAJOR.MINOR.PATCH with optional -prerelease and +build parts.
func validSemver(v string) bool {
	v, build, hasBuild := strings.Cut(v, "+")
	core, pre, hasPre := strings.Cut(v, "-")
	if (hasBuild && build == "") || (hasPre && pre == "") {
		return false
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil || (len(p) > 1 && p[0] == '0') {
			return false
		}
	}
	return true
}

// compareSemver orders semantic versions, with or without a "v" prefix,
// by the semver precedence rules; build metadata is ignored.
func compareSemver(a, b string) int {
	a, _, _ = strings.Cut(strings.TrimPrefix(a, "v"), "+")
	b, _, _ = strings.Cut(strings.TrimPrefix(b, "v"), "+")
	aCore, aPre, _ := strings.Cut(a, "-")
	bCore, bPre, _ := strings.Cut(b, "-")
	if c := compareIdents(aCore, bCore); c != 0 {
		return c
	}
	switch {
	case aPre == bPre:
		return 0
	case aPre == "": // a release sorts above its prereleases
		return 1
	case bPre == "":
		return -1
	}
	return compareIdents(aPre, bPre)
}

// compareIdents compares dot-separated identifiers: numeric ones by
// value and below the others, the others in ASCII order, and a longer
// list above its own prefix.
func compareIdents(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		an, aErr := strconv.ParseUint(as[i], 10, 64)
		bn, bErr := strconv.ParseUint(bs[i], 10, 64)
		var c int
		switch {
		case aErr == nil && bErr == nil:
			c = cmp.Compare(an, bn)
		case aErr == nil:
			c = -1
		case bErr == nil:
			c = 1
		default:
			c = strings.Compare(as[i], bs[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(as), len(bs))
}

// latestVersion picks what both the go command and npm call latest: the
// highest release, or the highest prerelease when there is no release.
func latestVersion(versions []string) string {
	var best, bestPre string
	for _, v := range versions {
		core, _, _ := strings.Cut(v, "+")
		if strings.Contains(core, "-") {
			if bestPre == "" || compareSemver(v, bestPre) > 0 {
				bestPre = v
			}
		} else if best == "" || compareSemver(v, best) > 0 {
			best = v
		}
	}
	return cmp.Or(best, bestPre)
}
