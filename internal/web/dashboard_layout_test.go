package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// TestDashboardLayouts: at 1280×800 and at a phone's 420 px the dashboard
// reads as it should: a pending approval, even with a long command, is
// shown whole (nothing clipped, no sideways scrolling), its buttons are a
// thumb's size on the phone, column names never break mid-word, and a
// live session offers its tandem attach command. Screenshots go to the
// test's artifact directory (go test -artifacts).
func TestDashboardLayouts(t *testing.T) {
	const long = "rsync -av --delete ./build/ deploy@prod-1.example.com:/srv/app/releases/2026-11-26T23-59-59Z/ && systemctl restart app.service"
	for _, vp := range viewports {
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

// TestDashboardDecidesSeveral: pending approvals selected together are
// decided together, each by its own request bound to its own action; what
// was not selected stays pending.
func TestDashboardDecidesSeveral(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	ctx := openDashboard(t, base)
	var res []<-chan outcome
	var items []string
	for i, cmd := range []string{"make a", "make b", "make c"} {
		res = append(res, ask(t, b, testAction(cmd)))
		items = append(items, showsPending(t, ctx, waitPending(t, b, i+1)[i].ID, cmd))
	}
	poll(t, ctx, `document.getElementById("bulk").hidden`)
	clickNamed(t, ctx, items[0], "checkbox", "Select")
	clickNamed(t, ctx, items[2], "checkbox", "Select")
	poll(t, ctx, `!document.getElementById("bulk").hidden && document.getElementById("selected-count").textContent === "2 selected"`)
	clicked := click(t, ctx, "#bulk", "Approve selected")
	for _, i := range []int{0, 2} {
		if o := decided(t, res[i], clicked); o.Kind != approval.Run || o.Approval.Action.Command != []string{"make a", "", "make c"}[i] {
			t.Errorf("selected approval %d: %+v", i, o)
		}
	}
	if p := b.Pending(); len(p) != 1 || p[0].Action.Command != "make b" {
		t.Fatalf("pending after deciding the selected: %+v", p)
	}
	poll(t, ctx, `document.getElementById("bulk").hidden && document.querySelectorAll("#pending li").length === 1`)
	clickNamed(t, ctx, items[1], "checkbox", "Select")
	if o := decided(t, res[1], click(t, ctx, "#bulk", "Deny selected")); o.Kind != approval.Refused {
		t.Errorf("denied: %+v", o)
	}
}

// clickNamed clicks the element of this role and accessible name in scope.
func clickNamed(t *testing.T, ctx context.Context, scope, role, name string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Click(name, named(scope, role, name))); err != nil {
		t.Fatalf("click %s %q in %s: %v", role, name, scope, err)
	}
}

// fakeNotifications stands in for the browser's Notification API, with
// permission granted, and lets a test put the tab in the background.
const fakeNotifications = `(() => {
	window.notes = [];
	function N(title, opts) { window.notes.push(title + " | " + ((opts && opts.body) || "")); this.close = function () {}; }
	N.permission = "granted";
	N.requestPermission = function () { return Promise.resolve("granted"); };
	window.Notification = N;
	Object.defineProperty(document, "visibilityState", { get: function () { return window.tabState || "visible"; } });
})()`

// TestDashboardInstallsAndNotifies: the dashboard is an installable web
// app (Chromium reads its manifest without errors, and its icon), and a
// new pending approval raises a notification while the tab is in the
// background, none for what was pending when the page opened.
func TestDashboardInstallsAndNotifies(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	res := ask(t, b, testAction("make before"))
	waitPending(t, b, 1)
	ctx := testenv.Browser(t)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fakeNotifications}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(web.DashboardURL(base, operatorToken))); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() === "live" && document.querySelectorAll("#pending li").length === 1`)
	m, err := chromedp.Call(ctx, page.GetAppManifest, page.GetAppManifestParams{})
	if err != nil || len(m.Errors) > 0 || m.Manifest == nil || m.Manifest.Name != "tandem operator dashboard" || len(m.Manifest.Icons) != 1 || !strings.HasSuffix(strings.ToLower(m.Manifest.Display), "standalone") {
		t.Fatalf("the manifest: %+v %v; parsed %+v", m, err, m.Manifest)
	}
	if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`fetch("/assets/icon.svg").then(r => r.ok && r.headers.get("Content-Type").startsWith("image/svg+xml"))`, chromedp.EvalAwaitPromise)); err != nil || !ok {
		t.Fatalf("the icon is not served as SVG (%v)", err)
	}

	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.tabState = "hidden"`)); err != nil {
		t.Fatal(err)
	}
	res2 := ask(t, b, testAction("make deploy"))
	waitPending(t, b, 2)
	poll(t, ctx, `window.notes.length === 1 && window.notes[0] === "tandem: approval needed in deploy-box | make deploy"`)
	for _, p := range b.Pending() {
		if _, err := b.Decide(t.Context(), p.ID, approval.Decision{Approved: true, By: approval.ByDashboard}); err != nil {
			t.Fatal(err)
		}
	}
	<-res
	<-res2
}
