package web_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// TestReplayNarrow: at a phone's 420 px, and at 1280 px, the replay of a
// 120-column recording shows every row whole (no row is wider than the
// terminal's box, nothing scrolls sideways), and the session's name is
// visible in full beside the player's controls.
func TestReplayNarrow(t *testing.T) {
	const name = "deploy-prod-db-migration"
	full := strings.Repeat("0123456789", 12) // a full 120-column row
	path := filepath.Join(t.TempDir(), "wide.cast")
	cast := `{"version":2,"width":120,"height":20}` + "\n" +
		`[0.1, "o", "$ make report\r\n"]` + "\n" +
		`[0.2, "o", "` + full + `"]` + "\n" +
		`[0.3, "o", "\r\nend-of-report\r\n"]` + "\n"
	if err := os.WriteFile(path, []byte(cast), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			base := startReplayServer(t, sessions{}, recordings{testKey: {name, path}})
			ctx := testenv.Browser(t)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h), chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
				t.Fatal(err)
			}
			poll(t, ctx, `window.tandem && window.tandem.status() !== "loading"`)
			setSpeed(t, ctx, "instant")
			poll(t, ctx, `window.tandem.done() && window.tandem.text().includes("end-of-report")`)
			if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.tandem.text()`)); err != nil || !strings.Contains(got, full) {
				t.Fatalf("the full row is not one row of the terminal (%v):\n%s", err, got)
			}
			// Every row of the terminal within the terminal's box, and the
			// box within the window.
			poll(t, ctx, `(() => {
				const box = document.getElementById("terminal"), b = box.getBoundingClientRect();
				if (b.right > innerWidth + 0.5 || document.documentElement.scrollWidth > innerWidth) return false;
				if (box.scrollWidth > box.clientWidth + 1) return false;
				const rows = box.querySelectorAll(".xterm-rows > div");
				if (rows.length < 20) return false;
				for (const row of rows) {
					for (const e of [row, ...row.querySelectorAll("span")]) {
						const r = e.getBoundingClientRect();
						if (r.width > 0 && r.right > b.left + box.clientWidth + 0.5) return false;
					}
				}
				return window.tandem.term.cols === 120;
			})()`)
			// The name whole, on the screen.
			poll(t, ctx, `(() => {
				const n = document.getElementById("name"), r = n.getBoundingClientRect();
				return n.textContent === "`+name+`" && r.width > 0 && r.left >= 0 && r.right <= innerWidth + 0.5 &&
					n.scrollWidth <= n.clientWidth + 1 && getComputedStyle(n).visibility === "visible";
			})()`)
			// The controls stay on the screen too.
			poll(t, ctx, `[...document.querySelectorAll("header *, .player *")].every(e => {
				const r = e.getBoundingClientRect();
				return r.width === 0 || r.right <= innerWidth + 0.5;
			})`)
			// Actual size is offered only where the rows were drawn smaller;
			// it draws them at 14 px, scrolling sideways, and back.
			fits := `(() => { const box = document.getElementById("terminal"); return box.scrollWidth <= box.clientWidth + 1; })()`
			if vp.name != "phone" {
				poll(t, ctx, `document.getElementById("zoom").hidden && window.tandem.term.options.fontSize === 14`)
				return
			}
			poll(t, ctx, `!document.getElementById("zoom").hidden && window.tandem.term.options.fontSize < 14`)
			if err := chromedp.Do(ctx, chromedp.Click("#zoom")); err != nil {
				t.Fatal(err)
			}
			poll(t, ctx, `window.tandem.term.options.fontSize === 14 && !`+fits+` && document.getElementById("zoom").getAttribute("aria-pressed") === "true"`)
			if err := chromedp.Do(ctx, chromedp.Click("#zoom")); err != nil {
				t.Fatal(err)
			}
			poll(t, ctx, `window.tandem.term.options.fontSize < 14 && `+fits)
		})
	}
}
