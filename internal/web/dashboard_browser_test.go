package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// decisionTime bounds how long a click takes to answer the agent's call.
const decisionTime = time.Second

// openDashboard starts a browser on the dashboard link, as the operator
// opens the one tandem printed, and waits until the page is live. It fails
// the test if the page ever opens a dialog.
func openDashboard(t *testing.T, base string) context.Context {
	t.Helper()
	ctx := testenv.Browser(t)
	var dialogs atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if n := dialogs.Load(); n > 0 {
			t.Errorf("the dashboard opened %d dialogs", n)
		}
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(web.DashboardURL(base, operatorToken))); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() === "live"`)
	// Gone after a reload: the page must never need one.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.loadedOnce = true`)); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// named selects, within the first element that matches the CSS selector
// scope, the one element whose role and accessible name are these, as a
// screen reader finds it. The query waits for it like any other.
func named(scope, role, name string) chromedp.QueryOption {
	return chromedp.ByFunc(func(ctx context.Context, t *chromedp.Target, root *chromedp.Node) ([]cdp.NodeID, error) {
		root.RLock()
		rootID := root.NodeID
		root.RUnlock()
		sc, err := cdp.Call(ctx, t, dom.QuerySelector, dom.QuerySelectorParams{NodeID: rootID, Selector: scope})
		if err != nil || sc.NodeID == 0 {
			return nil, err
		}
		res, err := cdp.Call(ctx, t, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{NodeID: sc.NodeID, AccessibleName: name, Role: role})
		if err != nil {
			return nil, err
		}
		var found []cdp.BackendNodeID
		for _, n := range res.Nodes {
			if !n.Ignored {
				found = append(found, n.BackendDOMNodeID)
			}
		}
		if len(found) != 1 {
			return nil, fmt.Errorf("%d %ss named %q in %s", len(found), role, name, scope)
		}
		ids, err := cdp.Call(ctx, t, dom.PushNodesByBackendIDsToFrontend, dom.PushNodesByBackendIDsToFrontendParams{BackendNodeIDs: found})
		return ids.NodeIDs, err
	})
}

// click clicks, with the mouse, the button named name in scope, and
// returns when it began: the button was visible then, so the click is
// after, and a bound measured from it is the stricter one.
func click(t *testing.T, ctx context.Context, scope, name string) time.Time {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	field := named(scope, "button", name)
	if err := chromedp.Do(cctx, chromedp.WaitVisible(name+" button", field)); err != nil {
		t.Fatalf("wait for %q in %s: %v", name, scope, err)
	}
	start := time.Now()
	if err := chromedp.Do(cctx, chromedp.Click(name+" button", field)); err != nil {
		t.Fatalf("click %q in %s: %v", name, scope, err)
	}
	return start
}

// typeInto types s, key by key, into the text field named name in scope.
func typeInto(t *testing.T, ctx context.Context, scope, role, name, s string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	field := named(scope, role, name)
	if err := chromedp.Do(cctx, chromedp.Clear(name, field), chromedp.Focus(name, field), testenv.TypeKeys(s)); err != nil {
		t.Fatalf("type into %q in %s: %v", name, scope, err)
	}
	got, err := chromedp.Run(cctx, chromedp.Value(name, field))
	if err != nil || got != s {
		t.Fatalf("%q in %s holds %q (%v), want %q", name, scope, got, err, s)
	}
}

// decided waits for the outcome of a call within decisionTime of the click
// that answered it, which began at clicked.
func decided(t *testing.T, res <-chan outcome, clicked time.Time) outcome {
	t.Helper()
	select {
	case o := <-res:
		if o.err != nil {
			t.Fatalf("Request: %v", o.err)
		}
		t.Logf("the call returned %v after the click began", o.at.Sub(clicked).Round(time.Millisecond))
		return o
	case <-time.After(time.Until(clicked.Add(decisionTime))):
		t.Fatalf("the agent's call did not return within %v of the click", decisionTime)
		return outcome{}
	}
}

// showsPending waits until the approval of id is in the pending list,
// visibly, and returns the CSS selector of its item.
func showsPending(t *testing.T, ctx context.Context, id, command string) string {
	t.Helper()
	item := `#pending li[data-id="` + id + `"]`
	poll(t, ctx, fmt.Sprintf(`(() => {
		const li = document.querySelector(%s);
		return li && li.checkVisibility() && li.querySelector("pre code").textContent === %s &&
			/expires in \d+:\d\d/.test(li.querySelector(".countdown").textContent);
	})()`, strconv.Quote(item), strconv.Quote(command)))
	return item
}

// movedToRecent waits until the approval of id has left the pending list
// and shows under recently decided with this status, without a reload.
func movedToRecent(t *testing.T, ctx context.Context, id, status, text string) {
	t.Helper()
	poll(t, ctx, fmt.Sprintf(`(() => {
		const li = document.querySelector('#recent li[data-id="' + %s + '"]');
		return window.loadedOnce && !document.querySelector('#pending li[data-id="' + %[1]s + '"]') &&
			li && li.checkVisibility() && li.dataset.status === %s &&
			li.querySelector(".verdict").textContent === %[2]s && li.textContent.includes(%s);
	})()`, strconv.Quote(id), strconv.Quote(status), strconv.Quote(text)))
}

func TestDashboardApprovesAndDenies(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	ctx := openDashboard(t, base)

	// Approve.
	res := ask(t, b, testAction("make deploy"))
	id := waitPending(t, b, 1)[0].ID
	item := showsPending(t, ctx, id, "make deploy")
	o := decided(t, res, click(t, ctx, item, "Approve"))
	if o.Kind != approval.Run || o.Approval.Decision.By != approval.ByDashboard || o.Approval.Decision.Approver != "operator" {
		t.Errorf("approved call returned %+v", o)
	}
	movedToRecent(t, ctx, id, "approved", "by dashboard (operator)")

	// Deny, with a reason.
	const reason = "not on a Friday"
	res = ask(t, b, testAction("make deploy-prod"))
	id = waitPending(t, b, 1)[0].ID
	item = showsPending(t, ctx, id, "make deploy-prod")
	typeInto(t, ctx, item, "textbox", "Reason", reason)
	o = decided(t, res, click(t, ctx, item, "Deny"))
	if o.Kind != approval.Refused || o.Approval.Decision.Reason != reason {
		t.Errorf("denied call returned %+v", o)
	}
	movedToRecent(t, ctx, id, "denied", reason)

	// Approve and remember for 5 minutes: the identical call then runs
	// without asking.
	act := testAction("make migrate")
	res = ask(t, b, act)
	id = waitPending(t, b, 1)[0].ID
	item = showsPending(t, ctx, id, "make migrate")
	typeInto(t, ctx, item, "spinbutton", "Remember for minutes", "5")
	o = decided(t, res, click(t, ctx, item, "Remember"))
	if o.Kind != approval.Run || o.Approval.Decision.Remember != 5*time.Minute {
		t.Errorf("remembered call returned %+v", o)
	}
	movedToRecent(t, ctx, id, "approved", "remembered for 5 min")
	start := time.Now()
	again, err := b.Request(ctx, act, "rules[2]", "", 30*time.Second, nil)
	if err != nil || again.Kind != approval.Run || !again.Remembered || time.Since(start) > decisionTime {
		t.Errorf("identical call after remember: %+v, %v after %v; want Run, Remembered, at once", again, err, time.Since(start))
	}
	if p := b.Pending(); len(p) != 0 {
		t.Errorf("pending after remember: %+v", p)
	}
	poll(t, ctx, `window.loadedOnce && document.getElementById("pending").children.length === 0 &&
		document.getElementById("pending-empty").checkVisibility()`)
}

// TestDashboardDecidedElsewhere: an approval answered by someone else
// leaves the pending list live, and the page says who decided.
func TestDashboardDecidedElsewhere(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory()), sessions{})
	ctx := openDashboard(t, base)
	res := ask(t, b, testAction("make deploy"))
	id := waitPending(t, b, 1)[0].ID
	showsPending(t, ctx, id, "make deploy")
	if _, err := b.Decide(ctx, id, approval.Decision{Approved: false, By: approval.ByClient, Reason: "the agent's user said no"}); err != nil {
		t.Fatal(err)
	}
	<-res
	movedToRecent(t, ctx, id, "denied", "by client")
	movedToRecent(t, ctx, id, "denied", "the agent's user said no")
}

// TestDashboardShowsDataAsText: commands, names and reasons are the agent's
// text, not the page's markup.
func TestDashboardShowsDataAsText(t *testing.T) {
	const (
		command = `<script>alert(1)</script>`
		name    = `"><img src=x onerror=alert(1)>`
	)
	b := newBroker()
	row := liveRow
	row.Name, row.LastCommand = name, command
	ended := endedRow
	ended.Name = name
	base := startDashboard(t, testOperator(b, newDirectory(row, ended)), sessions{})
	ctx := openDashboard(t, base)

	act := testAction(command)
	act.SessionName, act.Tenant, act.Actor, act.Cwd = name, name, name, name
	ask(t, b, act)
	id := waitPending(t, b, 1)[0].ID
	item := showsPending(t, ctx, id, command)
	poll(t, ctx, fmt.Sprintf(`(() => {
		const visible = (sel, text) => [...document.querySelectorAll(sel)].some(e => e.checkVisibility() && e.textContent === text);
		return visible(%[1]s + " dd", %[3]s) && visible("#live td", %[3]s) && visible("#live td code", %[2]s) &&
			visible("#ended td", %[3]s);
	})()`, strconv.Quote(item), strconv.Quote(command), strconv.Quote(name)))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.images.length, document.scripts.length,
		document.querySelectorAll("[onerror]").length]`))
	if err != nil || got[0] != 0 || got[1] != 1 || got[2] != 0 {
		t.Errorf("images, scripts, onerror attributes = %v (%v); want 0, 1 (dashboard.js), 0", got, err)
	}
}

// TestDashboardWatchOpensSession: Watch opens the session's monitoring page
// in a new tab; the dashboard itself never holds the key.
func TestDashboardWatchOpensSession(t *testing.T) {
	term := newFakeTerm("deploy-box")
	base := startDashboard(t, testOperator(newBroker(), newDirectory(liveRow)), sessions{testKey: term})
	ctx := openDashboard(t, base)
	row := `#live tr[data-id="s1"]`
	poll(t, ctx, `(() => { const r = document.querySelector('`+row+`'); return r && r.checkVisibility(); })()`)
	click(t, ctx, row, "Watch")
	term.waitFor(t, "the monitoring page to connect", func() bool { return term.watchers == 1 })
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, testKey) {
		t.Errorf("the dashboard holds the monitoring key")
	}
}

// TestDashboardSignIn: without the cookie the page says where the link
// comes from, and stays; the link opened from another site's page signs
// in although the browser withholds the SameSite=Strict cookie from the
// redirect that follows a cross-site click.
func TestDashboardSignIn(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `document.body && document.body.innerText.includes("tandem dashboard-url")`)

	// Another site (an opaque origin) links to the dashboard.
	link := `data:text/html,<a id="open" href="` + web.DashboardURL(base, operatorToken) + `">dashboard</a>`
	if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(cctx, chromedp.Click(chromedp.ID("open"))); err != nil {
		t.Fatalf("click the link: %v", err)
	}
	pollAcrossLoads(t, ctx, `location.href === `+strconv.Quote(base+"/")+` && window.tandem && window.tandem.status() === "live"`)
}

// pollAcrossLoads is poll for a condition that holds only after the page
// has navigated on its own, perhaps more than once.
func pollAcrossLoads(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", expr, err)
		}
		// The page navigated while polled ("Inspected target navigated",
		// "Cannot find context"): poll the next one.
	}
}
