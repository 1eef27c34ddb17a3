package web_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// openReplay starts a browser on the page of testKey and waits until its
// recording is loaded.
func openReplay(t *testing.T, base string) context.Context {
	t.Helper()
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() !== "loading"`)
	return ctx
}

// setSpeed picks a speed in the page's selector, as a human would.
func setSpeed(t *testing.T, ctx context.Context, speed string) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("speed"), speed),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("speed").dispatchEvent(new Event("change"))`))
	if err != nil {
		t.Fatalf("speed %s: %v", speed, err)
	}
}

func TestBrowserReplay(t *testing.T) {
	base := startReplayServer(t, sessions{}, recordings{testKey: {"replayed", writeCast(t)}})
	ctx := openReplay(t, base)
	setSpeed(t, ctx, "instant")
	poll(t, ctx, `window.tandem.done()`)

	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.tandem.text()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"$ echo café\n", "\ncafé\n", "recorded output \ufffd"} {
		if !strings.Contains(text, want) {
			t.Errorf("replayed screen lacks %q:\n%s", want, strings.TrimRight(text, "\n"))
		}
	}
	if strings.Contains(text, "exit") {
		t.Errorf("input events were shown as output:\n%s", text)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
		String(window.tandem.term.cols), String(window.tandem.term.rows),
		document.getElementById("status").textContent,
		document.getElementById("name").textContent,
		...[...document.querySelectorAll("style")].filter(s => !s.sheet).map(s => "blocked style " + s.textContent.slice(0, 40)),
	]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"100", "30", "ended — replay", "replayed"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("page shows %q, want %q (the recorded resize applied, styles allowed)", got, want)
	}
}

// TestBrowserReplayTiming plays a hand-written recording whose second line
// comes three seconds after the first, at 1x, then again at instant speed.
func TestBrowserReplayTiming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timed.cast")
	cast := `{"version":2,"width":60,"height":10}` + "\n" +
		`[0.1, "o", "first line\r\n"]` + "\n" +
		`[0.2, "i", "typed\r"]` + "\n" +
		`[3.1, "o", "three seconds later\r\n"]` + "\n"
	if err := os.WriteFile(path, []byte(cast), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startReplayServer(t, sessions{}, recordings{testKey: {"timed", path}})
	ctx := openReplay(t, base)
	waitText(t, ctx, "first line")
	early, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](`[window.tandem.done(), window.tandem.text()]`))
	if err != nil {
		t.Fatal(err)
	}
	if early[0] != false || strings.Contains(early[1].(string), "later") {
		t.Errorf("at 1x the whole recording played at once: done %v, screen:\n%s", early[0], early[1])
	}
	poll(t, ctx, `window.tandem.done()`)
	waitText(t, ctx, "three seconds later")

	setSpeed(t, ctx, "instant")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("again"))); err != nil {
		t.Fatalf("play again: %v", err)
	}
	poll(t, ctx, `window.tandem.done() && window.tandem.text().includes("later")`)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.tandem.text().split("first line").length - 1`))
	if err != nil || n != 1 {
		t.Errorf("after playing again the output shows %d times (%v), want once", n, err)
	}
}

func TestBrowserReplayEscapesName(t *testing.T) {
	const name = `<img src=x onerror=alert(1)>`
	ctx := openReplay(t, startReplayServer(t, sessions{}, recordings{testKey: {name, writeCast(t)}}))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("name").textContent, document.title, String(document.images.length)]`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != name || got[1] != name+" · replay · tandem" || got[2] != "0" {
		t.Errorf("name %q, title %q, %s images; want the name as literal text and no image", got[0], got[1], got[2])
	}
}
