package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/approval"
)

// TestDashboardLayouts: at 1280×800 and at a phone's 420 px the dashboard
// reads as it should: a pending approval, even with a long command, is
// shown whole (nothing clipped, no sideways scrolling), its buttons are a
// thumb's size on the phone, column names never break mid-word, and a
// live session offers its tandem attach command. Screenshots go to the
// test's artifact directory (go test -artifacts).
func TestDashboardLayouts(t *testing.T) {
	const long = "rsync -av --delete ./build/ deploy@prod-1.example.com:/srv/app/releases/2026-11-26T23-59-59Z/ && systemctl restart app.service"
	for _, vp := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 420, 800}} {
		t.Run(vp.name, func(t *testing.T) {
			b := newBroker()
			base := startDashboard(t, testOperator(b, newDirectory(liveRow, endedRow)), sessions{})
			ctx := openDashboard(t, base)
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h)); err != nil {
				t.Fatal(err)
			}
			res := ask(t, b, testAction(long))
			id := waitPending(t, b, 1)[0].ID
			item := showsPending(t, ctx, id, long)
			poll(t, ctx, fmt.Sprintf(`(() => {
				const li = document.querySelector(%s), box = li.getBoundingClientRect();
				if (box.right > innerWidth + 0.5 || document.documentElement.scrollWidth > innerWidth) return false;
				for (const e of li.querySelectorAll("*")) {
					const r = e.getBoundingClientRect();
					if (r.width > 0 && r.right > box.right + 0.5) return false;
					if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) return false;
				}
				return true;
			})()`, strconv.Quote(item)))
			if vp.name == "phone" {
				for _, name := range []string{"approve", "deny"} {
					h, err := chromedp.Run(ctx, chromedp.Evaluate[float64](fmt.Sprintf(
						`document.querySelector(%s).querySelector("button.%s").getBoundingClientRect().height`, strconv.Quote(item), name)))
					if err != nil || h < 44 {
						t.Errorf("%s is %v px high (%v); want at least 44", name, h, err)
					}
				}
			}
			// Column names are whole words on one line.
			poll(t, ctx, `[...document.querySelectorAll("#live th")].every(th => th.offsetHeight === 0 ||
				th.offsetHeight < 2 * parseFloat(getComputedStyle(th).lineHeight))`)
			poll(t, ctx, `document.querySelector('#live tr[data-id="s1"]').textContent.includes("tandem attach s1")`)
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "dashboard-"+vp.name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
			if o := decided(t, res, click(t, ctx, item, "Approve")); o.Kind != approval.Run {
				t.Errorf("approved at %s: %+v", vp.name, o)
			}
		})
	}
}
