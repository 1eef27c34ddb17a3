package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/web"
)

// markedCast is a recording with tandem's command markers: the agent's
// command at 0.5 s, the human's at 3 s, more output at 6 s.
const markedCast = `{"version":2,"width":80,"height":24}
[0.0,"o","$ "]
[0.5,"m","agent: echo one"]
[0.6,"o","echo one\r\none\r\n$ "]
[1.5,"m","end agent: 0"]
[2.9,"o","echo two\r\n"]
[3.0,"m","human: echo two"]
[3.1,"o","two\r\n$ "]
[6.0,"o","echo three\r\nthree\r\n"]
`

// TestBrowserReplayPlayer: the replay plays like a player. Each command
// is a mark on the seek bar, the agent's and the human's told apart; pause
// holds the position; a click on a mark jumps there, showing the output up
// to that moment only; #t=SECONDS in the address starts there; Link here
// puts the moment in the address.
func TestBrowserReplayPlayer(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) { replayPlayer(t, vp.w, vp.h) })
	}
}

// viewports are the screens the pages are tested at: a laptop's and a
// phone's.
var viewports = []struct {
	name string
	w, h int64
}{{"desktop", 1280, 800}, {"phone", 420, 800}}

func replayPlayer(t *testing.T, width, height int64) {
	path := filepath.Join(t.TempDir(), "marked.cast")
	if err := os.WriteFile(path, []byte(markedCast), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startReplayServer(t, sessions{}, recordings{testKey: {"marked", path}})
	ctx := openReplay(t, base)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, height)); err != nil {
		t.Fatal(err)
	}
	marks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("#marks .mark")].map(m => m.dataset.source + "|" + m.getAttribute("aria-label"))`))
	if err != nil || strings.Join(marks, ",") != "agent|agent: echo one,human|human: echo two" {
		t.Fatalf("marks %q (%v)", marks, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click("#pause")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.getElementById("progress").textContent.startsWith("paused")`)
	// Paused, the position holds (checked across 600 ms of the page's own clock).
	held, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		const a = window.tandem.position();
		await new Promise(r => setTimeout(r, 600));
		return window.tandem.position() === a;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || !held {
		t.Fatalf("the position moved while paused (%v)", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#marks .mark.human`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `window.tandem.position() === 3 && window.tandem.text().includes("echo two") && !window.tandem.text().includes("three")`)
	if err := chromedp.Do(ctx, chromedp.Click("#link")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `location.hash === "#t=3.0"`)

	// A link to a moment starts there.
	if err := chromedp.Do(ctx, chromedp.Navigate(web.MonitorURL(base, testKey)+"#t=6.5")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `window.tandem && window.tandem.done() && window.tandem.text().includes("three")`)
}
