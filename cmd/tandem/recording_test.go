package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/recording"
	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestRecordingAndReplay: a session's asciicast parses as v2, holds the
// commands' output, and the browser replays it once the session ended.
func TestRecordingAndReplay(t *testing.T) {
	s := localSession(t, serverOpts{})
	url := str(mustOK(t, s.srv.call(t, "ssh_get_monitoring_url", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))["monitoringUrl"])
	mustOK(t, s.exec(t, "echo recorded-out; echo recorded-err >&2"))
	mustOK(t, s.exec(t, "printf 'caf\\303\\251 \\342\\234\\223\\n'"))
	mustOK(t, s.srv.call(t, "ssh_disconnect", map[string]any{"sessionName": s.name, "sessionToken": s.tok}))

	_, h, events := onlyCast(t, s.srv.dataDir)
	if h.Version != 2 || h.Width <= 0 || h.Height <= 0 {
		t.Errorf("header %+v", h)
	}
	var out strings.Builder
	for i, e := range events {
		if i > 0 && e.Time < events[i-1].Time {
			t.Fatalf("event %d goes back in time", i)
		}
		if e.Code == "o" {
			out.WriteString(e.Data)
		}
	}
	for _, want := range []string{"recorded-out", "recorded-err", "café ✓"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("cast output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "133;") || strings.Contains(out.String(), "n=") && strings.Contains(out.String(), "633;") {
		t.Error("shell-integration marks leaked into the recording")
	}

	ctx := testenv.Browser(t)
	err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.ID("speed")),
		chromedp.SetValue(chromedp.ID("speed"), "instant"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("speed").dispatchEvent(new Event("change"))`))
	if err != nil {
		t.Fatal(err)
	}
	waitScreen(t, ctx, func(s string) bool { return contains(s, "recorded-out") && contains(s, "café ✓") })
}

// onlyCast reads the one recording in dataDir: its path, header and events.
func onlyCast(t *testing.T, dataDir string) (string, recording.Header, []recording.Event) {
	t.Helper()
	casts, _ := filepath.Glob(filepath.Join(dataDir, "recordings", "*.cast"))
	if len(casts) != 1 {
		t.Fatalf("want one cast, found %v", casts)
	}
	f, err := os.Open(casts[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, events, err := recording.Read(f)
	if err != nil {
		t.Fatalf("cast does not parse as asciicast v2: %v", err)
	}
	return casts[0], h, events
}
