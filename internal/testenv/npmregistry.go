package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// NPMPackage is one version of an npm package that [NPMRegistry] serves.
type NPMPackage struct {
	Name    string // "left-pad" or scoped, "@scope/left-pad"
	Version string // semver without "v": "1.2.3"
	// Files maps a slash-separated name relative to the package root to
	// its content. Without a "package.json" entry, one holding Name and
	// Version is added. A given package.json must name the same Name
	// and Version; its other fields (dependencies, main, bin) are
	// published in the packument too, so npm resolves dependencies among
	// the served packages.
	Files map[string]string
}

// npmTime is the publication time of every served version: npm wants
// one per version, and tests want answers that do not change. It is
// npm pack's own fixed tar time.
var npmTime = time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC)

// npmVersion is one served version, ready to answer.
type npmVersion struct {
	manifest  map[string]any // package.json, published in the packument
	file      string         // tarball name: "left-pad-1.2.3.tgz"
	tgz       []byte
	shasum    string // hex SHA-1 of tgz, for old clients
	integrity string // "sha512-" + base64 SHA-512 of tgz
}

// NPMRegistry serves pkgs for t by enough of the npm registry protocol
// for `npm install NAME` and `npm install NAME@VERSION`, over plain HTTP:
// GET /NAME answers the packument, GET /NAME/-/BASE-VERSION.tgz the
// tarball. Scoped names work both as "/@scope%2fname", which npm sends,
// and "/@scope/name". dist-tags.latest is the highest release.
//
// Tarball URLs in the packument use the Host the request came in on, not
// 127.0.0.1, so the registry also works when reached under another name
// through a proxy. Anything unknown answers 404. A malformed package
// fails t at once.
func NPMRegistry(t testing.TB, pkgs ...NPMPackage) *Registry {
	t.Helper()
	byName := map[string]map[string]*npmVersion{}
	for _, p := range pkgs {
		v, err := newNPMVersion(p)
		if err != nil {
			t.Fatalf("testenv: NPMRegistry: %s@%s: %v", p.Name, p.Version, err)
		}
		if byName[p.Name] == nil {
			byName[p.Name] = map[string]*npmVersion{}
		}
		if byName[p.Name][p.Version] != nil {
			t.Fatalf("testenv: NPMRegistry: %s@%s given twice", p.Name, p.Version)
		}
		byName[p.Name][p.Version] = v
	}
	return serveRegistry(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, file, isTarball := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/-/")
		versions := byName[name]
		if versions == nil {
			npmNotFound(w)
			return
		}
		if !isTarball {
			host := r.Host
			if host == "" { // HTTP/1.0 without Host: the address dialled
				host = r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()
			}
			writeJSON(w, packument(name, versions, "http://"+host+"/"))
			return
		}
		for _, v := range versions {
			if v.file == file {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(v.tgz)
				return
			}
		}
		npmNotFound(w)
	}))
}

// newNPMVersion checks p and builds its tarball.
func newNPMVersion(p NPMPackage) (*npmVersion, error) {
	base := p.Name
	if scope, rest, scoped := strings.Cut(p.Name, "/"); scoped {
		if len(scope) < 2 || scope[0] != '@' {
			return nil, fmt.Errorf("invalid name %q: only scoped names (@scope/name) have a slash", p.Name)
		}
		base = rest
	}
	if base == "" || strings.ContainsAny(base, "/@%\\ ") || base[0] == '.' || base[0] == '_' {
		return nil, fmt.Errorf("invalid package name %q", p.Name)
	}
	if !validSemver(p.Version) {
		return nil, fmt.Errorf("version %q is not semver (MAJOR.MINOR.PATCH, no \"v\")", p.Version)
	}
	files := maps.Clone(p.Files)
	if files == nil {
		files = map[string]string{}
	}
	manifest := map[string]any{}
	if pj, ok := files["package.json"]; ok {
		if err := json.Unmarshal([]byte(pj), &manifest); err != nil {
			return nil, fmt.Errorf("package.json: %w", err)
		}
		if manifest["name"] != p.Name || manifest["version"] != p.Version {
			return nil, fmt.Errorf("package.json names %v@%v", manifest["name"], manifest["version"])
		}
	} else {
		manifest["name"], manifest["version"] = p.Name, p.Version
		pj, _ := json.MarshalIndent(manifest, "", "  ")
		files["package.json"] = string(pj) + "\n"
	}
	tgz, err := npmTarball(files)
	if err != nil {
		return nil, err
	}
	sha1Sum, sha512Sum := sha1.Sum(tgz), sha512.Sum512(tgz)
	return &npmVersion{
		manifest:  manifest,
		file:      base + "-" + p.Version + ".tgz",
		tgz:       tgz,
		shasum:    hex.EncodeToString(sha1Sum[:]),
		integrity: "sha512-" + base64.StdEncoding.EncodeToString(sha512Sum[:]),
	}, nil
}

// npmTarball writes files as npm pack does: a gzipped tar with every
// file under "package/".
func npmTarball(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !fs.ValidPath(name) || name == "." || strings.Contains(name, "\\") {
			return nil, fmt.Errorf("invalid file name %q", name)
		}
		body := files[name]
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: "package/" + name, Mode: 0o644,
			Size: int64(len(body)), ModTime: npmTime,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// packument is the registry's document for one package: every version's
// manifest with its dist (tarball URL under base, checksums), the
// dist-tags and the publication times.
func packument(name string, versions map[string]*npmVersion, base string) map[string]any {
	docs := map[string]any{}
	times := map[string]any{"created": npmTime, "modified": npmTime}
	for ver, v := range versions {
		m := maps.Clone(v.manifest)
		m["_id"] = name + "@" + ver
		m["dist"] = map[string]any{
			"tarball":   base + name + "/-/" + v.file,
			"shasum":    v.shasum,
			"integrity": v.integrity,
		}
		docs[ver] = m
		times[ver] = npmTime
	}
	return map[string]any{
		"_id":       name,
		"name":      name,
		"dist-tags": map[string]string{"latest": latestVersion(slices.Collect(maps.Keys(versions)))},
		"versions":  docs,
		"time":      times,
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// npmNotFound answers as the public registry does, which npm reports as
// E404.
func npmNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"error":"Not found"}` + "\n"))
}
