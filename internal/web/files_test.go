package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tandem-sh/tandem/internal/web"
)

// fileTerm is a fake terminal whose files are a real directory: what the
// session layer does with policy and the sandbox is its own business, so
// here a path with ".." escapes and one under "secret/" is denied by a
// rule, each refused as the real desk refuses them.
type fileTerm struct {
	*fakeTerm
	dir   string
	limit int64

	mu    sync.Mutex
	moved []string // "put|get path bytes viewer"
}

func newFileTerm(t *testing.T, limit int64) *fileTerm {
	return &fileTerm{fakeTerm: newFakeTerm("files"), dir: t.TempDir(), limit: limit}
}

func (f *fileTerm) FileLimits() (int64, int64) { return f.limit, f.limit }

func (f *fileTerm) check(p string) error {
	switch {
	case strings.Contains(p, ".."):
		return &web.FileError{Kind: web.ErrFileRefused, Code: "path_escapes", Message: p + " leads out of the workspace"}
	case p == "offline":
		return web.ErrFileUnavailable
	case strings.HasPrefix(p, "secret/"):
		return &web.FileError{Kind: web.ErrFileRefused, Code: "policy_denied", Message: `the policy rule "no secrets" denies ` + p}
	}
	return nil
}

func (f *fileTerm) note(ctx context.Context, op, p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moved = append(f.moved, op+"|"+p+"|"+web.ViewerFrom(ctx))
}

func (f *fileTerm) PutFile(ctx context.Context, p string, body io.Reader, overwrite bool) (web.FileMoved, error) {
	if err := f.check(p); err != nil {
		return web.FileMoved{}, err
	}
	full := filepath.Join(f.dir, p)
	if _, err := os.Stat(full); err == nil && !overwrite {
		return web.FileMoved{}, web.ErrFileExists
	}
	tmp, err := os.CreateTemp(f.dir, ".upload-*")
	if err != nil {
		return web.FileMoved{}, err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	tmp.Close()
	if err != nil {
		return web.FileMoved{}, err
	}
	if err := os.Rename(tmp.Name(), full); err != nil {
		return web.FileMoved{}, err
	}
	f.note(ctx, "put", p)
	return web.FileMoved{Path: p, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (f *fileTerm) GetFile(ctx context.Context, p string, start func(int64) io.Writer) (web.FileMoved, error) {
	if err := f.check(p); err != nil {
		return web.FileMoved{}, err
	}
	b, err := os.ReadFile(filepath.Join(f.dir, p))
	if errors.Is(err, os.ErrNotExist) {
		return web.FileMoved{}, web.ErrFileNotFound
	}
	if err != nil {
		return web.FileMoved{}, err
	}
	if int64(len(b)) > f.limit {
		return web.FileMoved{}, web.ErrFileTooLarge
	}
	if _, err := start(int64(len(b))).Write(b); err != nil {
		return web.FileMoved{}, err
	}
	f.note(ctx, "get", p)
	sum := sha256.Sum256(b)
	return web.FileMoved{Path: p, Bytes: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}, nil
}

func (f *fileTerm) movedList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.moved...)
}

// terms is a fixed set of live terminals of any kind, by key.
type terms map[string]web.Terminal

func (s terms) Terminal(key string) (web.Terminal, bool) {
	t, ok := s[key]
	return t, ok
}

// filesURL is the files route of key's page for path.
func filesURL(key, path string) string { return "/s/" + key + "/files?path=" + path }

// TestFilesNeedTheOperator: the signed-in operator and an admitted guest
// upload and download; the watch link alone, a wrong cookie and another
// session's typing link get 403 for both and nothing is written; a POST
// from another origin, or without one, is refused before the desk sees it.
func TestFilesNeedTheOperator(t *testing.T) {
	const otherKey = "k-0000000000000000000000000000other"
	term := newFileTerm(t, 1<<20)
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), terms{testKey: term, otherKey: newFileTerm(t, 1<<20)})
	admitted := admitCookieFrom(t, base, typingLink(t, base, testKey))
	other := admitCookieFrom(t, base, typingLink(t, base, otherKey))

	cases := []struct {
		name   string
		cookie string
		header map[string]string
		status int
		code   string
	}{
		{"the operator", "", nil, 200, ""},
		{"an admitted guest", "-", map[string]string{"Cookie": "tandem_admit=" + admitted.Value}, 200, ""},
		{"the operator token as a bearer", "-", map[string]string{"Authorization": "Bearer " + operatorToken}, 200, ""},
		{"the watch link alone", "-", nil, 403, "watching_only"},
		{"a wrong operator cookie", "nope", nil, 403, "watching_only"},
		{"another session's typing link", "-", map[string]string{"Cookie": "tandem_admit=" + other.Value}, 403, "watching_only"},
		{"another origin", "", map[string]string{"Origin": "http://evil.test"}, 403, "cross_origin"},
		{"a same-site page on another port", "", map[string]string{"Origin": "http://127.0.0.1:1"}, 403, "cross_origin"},
		{"no origin", "", map[string]string{"Origin": ""}, 403, "cross_origin"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "f" + string(rune('a'+i)) + ".bin"
			body := "payload of " + tc.name
			status, raw, m := request{method: "POST", path: filesURL(testKey, name), body: body, cookie: tc.cookie, header: tc.header}.do(t, base)
			if status != tc.status || (tc.code != "" && m["error"] != tc.code) {
				t.Fatalf("upload: %d %s, want %d %s", status, raw, tc.status, tc.code)
			}
			_, err := os.Stat(filepath.Join(term.dir, name))
			if tc.status != 200 {
				if err == nil {
					t.Errorf("a refused upload wrote the file")
				}
				if str(m["message"]) == "" {
					t.Errorf("a refusal without a message: %s", raw)
				}
			} else {
				sum := sha256.Sum256([]byte(body))
				if m["success"] != true || m["path"] != name || m["bytes"] != float64(len(body)) || m["sha256"] != hex.EncodeToString(sum[:]) {
					t.Errorf("upload reply: %s", raw)
				}
			}

			// Download: a GET sends no Origin; the session's own page may.
			get := map[string]string{"Origin": ""}
			for k, v := range tc.header {
				if k != "Origin" {
					get[k] = v
				}
			}
			if tc.code == "cross_origin" {
				get["Sec-Fetch-Site"] = "same-site"
			}
			if tc.status != 200 {
				name = "fa.bin" // the operator's, written above
			}
			status, raw, _ = request{path: filesURL(testKey, name), cookie: tc.cookie, header: get}.do(t, base)
			if status != tc.status {
				t.Fatalf("download: %d %s, want %d", status, raw, tc.status)
			}
			if tc.status == 200 && raw != body {
				t.Errorf("download = %q, want %q", raw, body)
			}
		})
	}
	for _, m := range term.movedList() {
		if v := strings.Split(m, "|")[2]; !strings.HasPrefix(v, "operator ") && !strings.HasPrefix(v, "admitted viewer ") {
			t.Errorf("a transfer named its viewer %q", v)
		}
	}
}

// TestFilesRefusals: each refusal of the desk reaches the page as its
// status, stable code and sentence; a body over the limit is refused
// whether or not it says its length, and leaves nothing.
func TestFilesRefusals(t *testing.T) {
	term := newFileTerm(t, 64)
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), terms{testKey: term})
	if err := os.WriteFile(filepath.Join(term.dir, "there.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 65)
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code, message            string
	}{
		{"escapes", "POST", filesURL(testKey, "../x"), "a", nil, 403, "path_escapes", "leads out of the workspace"},
		{"denied by a rule", "POST", filesURL(testKey, "secret/k"), "a", nil, 403, "policy_denied", `"no secrets"`},
		{"denied download", "GET", filesURL(testKey, "secret/k"), "", nil, 403, "policy_denied", `"no secrets"`},
		{"no path", "POST", "/s/" + testKey + "/files", "a", nil, 400, "bad_path", "?path="},
		{"exists", "POST", filesURL(testKey, "there.txt"), "new", nil, 409, "file_exists", "Replace"},
		{"too large, said", "POST", filesURL(testKey, "big"), big, nil, 413, "file_too_large", "64 bytes"},
		{"not found", "GET", filesURL(testKey, "nope"), "", nil, 404, "file_not_found", "no file"},
		{"unavailable", "POST", filesURL(testKey, "offline"), "a", nil, 503, "transfer_unavailable", "right now"},
		{"unknown session", "POST", filesURL("k-unknown", "a"), "a", nil, 404, "not_found", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, raw, m := request{method: tc.method, path: tc.path, body: tc.body, header: tc.header}.do(t, base)
			if status != tc.status || m["success"] != nil && m["success"] != false || m["error"] != tc.code || !strings.Contains(str(m["message"]), tc.message) {
				t.Errorf("%d %s, want %d %s %q", status, raw, tc.status, tc.code, tc.message)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(term.dir, "there.txt")); string(b) != "old" {
		t.Errorf("a refused upload replaced the file: %q", b)
	}

	// A chunked body (no length) over the limit is cut off at the limit.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(big))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", base+filesURL(testKey, "chunked"), pr)
	req.Header.Set("Origin", base)
	req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength > 0 {
		t.Errorf("chunked over the limit: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(term.dir, "chunked")); err == nil {
		t.Errorf("the chunked upload over the limit left a file")
	}

	// A HEAD would read the file and tell of a download no one made.
	head, _ := http.NewRequest("HEAD", base+filesURL(testKey, "there.txt"), nil)
	head.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
	if resp, err := http.DefaultClient.Do(head); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("HEAD: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if moved := term.movedList(); len(moved) != 0 {
		t.Errorf("refusals moved files: %v", moved)
	}

	// Replace, asked for, replaces.
	status, raw, _ := request{method: "POST", path: filesURL(testKey, "there.txt") + "&overwrite=1", body: "new"}.do(t, base)
	if b, _ := os.ReadFile(filepath.Join(term.dir, "there.txt")); status != 200 || string(b) != "new" {
		t.Errorf("overwrite: %d %s, file %q", status, raw, b)
	}
}

// TestDownloadIsAnAttachment: a file the session wrote never renders on
// the page's origin: it comes as an octet stream, as an attachment, under
// a sandboxing policy.
func TestDownloadIsAnAttachment(t *testing.T) {
	term := newFileTerm(t, 1<<20)
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), terms{testKey: term})
	page := `<script>alert(document.cookie)</script>`
	if err := os.WriteFile(filepath.Join(term.dir, "x.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", base+filesURL(testKey, "x.html"), nil)
	req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: operatorToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Content-Type-Options") != "nosniff" ||
		h.Get("Content-Disposition") != `attachment; filename=x.html` || !strings.HasPrefix(h.Get("Content-Security-Policy"), "sandbox") ||
		h.Get("Content-Length") != strconv.Itoa(len(page)) {
		t.Errorf("download headers: %d %v", resp.StatusCode, h)
	}
}

func str(v any) string { s, _ := v.(string); return s }
