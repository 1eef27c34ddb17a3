package web_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/web"
)

// writeCast records a short session the way the terminal engine would:
// output split inside a character, input, a resize.
func writeCast(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rec", "session.cast")
	w, err := recording.Create(path, recording.Header{Width: 80, Height: 24, Title: "replayed"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"$ ", "echo caf", "\xc3", "\xa9\r\n", "caf\xc3\xa9\r\n"} {
		w.Output([]byte(p))
	}
	w.Input([]byte("exit\r"))
	w.Resize(100, 30)
	w.Output([]byte("\x1b[1mrecorded output\x1b[0m \xff\r\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReplayPage(t *testing.T) {
	const name = `<img src=x onerror=alert(1)>`
	base := startReplayServer(t, sessions{}, recordings{testKey: {name, writeCast(t)}})
	resp := get(t, web.MonitorURL(base, testKey))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	checkHeaders(t, resp, "text/html; charset=utf-8")
	page := body(t, resp)
	checkPageSafe(t, page, name)
	if !strings.Contains(page, "ended — replay") || !strings.Contains(page, "/assets/replay.js") {
		t.Errorf("not the replay page:\n%s", page)
	}
}

func TestReplayCast(t *testing.T) {
	path := writeCast(t)
	base := startReplayServer(t, sessions{}, recordings{testKey: {"replayed", path}})
	resp := get(t, web.MonitorURL(base, testKey)+"/cast")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	checkHeaders(t, resp, "application/x-asciicast")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// No operator signed in: the input event is left out (castinput_test.go).
	var withoutInput strings.Builder
	for _, line := range strings.SplitAfter(string(want), "\n") {
		if !strings.Contains(line, `, "i", `) {
			withoutInput.WriteString(line)
		}
	}
	if !strings.Contains(string(want), `, "i", "exit\r"]`) {
		t.Fatalf("the recording has no input event to leave out:\n%s", want)
	}
	if got := body(t, resp); got != withoutInput.String() {
		t.Errorf("cast served differs from the file:\n%s", got)
	}
	if _, events, err := recording.Read(strings.NewReader(string(want))); err != nil || len(events) == 0 {
		t.Errorf("the recording does not read back: %d events, %v", len(events), err)
	}
}

// checkHeaders checks the headers every replay response carries.
func checkHeaders(t *testing.T, resp *http.Response, contentType string) {
	t.Helper()
	for header, want := range map[string]string{
		"Content-Type":           contentType,
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"Cache-Control":          "no-store",
		"X-Frame-Options":        "DENY",
	} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

func TestReplayNotFound(t *testing.T) {
	dir := t.TempDir()
	const gone, liveKey = "k-gone", "k-live"
	base := startReplayServer(t, sessions{liveKey: newFakeTerm("live")}, recordings{
		testKey: {"replayed", writeCast(t)},
		gone:    {"deleted", filepath.Join(dir, "deleted.cast")}, // no such file
		"k-dir": {"a directory", dir},
	})
	unknown := body(t, get(t, base+"/no/such/page"))
	for _, path := range []string{
		"/s/wrong-key", "/s/wrong-key/cast",
		"/s/" + gone, "/s/" + gone + "/cast",
		"/s/k-dir", "/s/k-dir/cast",
		"/s/" + liveKey + "/cast", // live: nothing recorded to serve yet
		"/s/" + testKey + "/ws",   // ended: nothing to join
	} {
		resp := get(t, base+path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status = %d, want 404", path, resp.StatusCode)
		}
		if got := body(t, resp); got != unknown {
			t.Errorf("GET %s: body differs from any unknown path's:\n%s", path, got)
		}
	}
}

func TestLiveSessionWinsOverRecording(t *testing.T) {
	base := startReplayServer(t, sessions{testKey: newFakeTerm("live")}, recordings{testKey: {"replayed", writeCast(t)}})
	page := body(t, get(t, web.MonitorURL(base, testKey)))
	if !strings.Contains(page, "/assets/terminal.js") || strings.Contains(page, "/assets/replay.js") {
		t.Errorf("a live session's page is not the terminal:\n%s", page)
	}
}
