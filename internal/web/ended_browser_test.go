package web_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/web"
)

// endingTerm is a fake terminal with a status strip that ends with a
// reason.
type endingTerm struct {
	reasonTerm
	st web.SessionStatus
}

func (e endingTerm) Status() web.SessionStatus           { return e.st }
func (e endingTerm) WatchStatus(fn func()) (stop func()) { return func() {} }

// TestBrowserEndedPageStopsTyping: once the session ends, the operator's
// page no longer says "you may type", offers no typing link, takes no
// keys, and its strip says why the session ended (it went on saying
// "you may type" beside a Typing link button).
func TestBrowserEndedPageStopsTyping(t *testing.T) {
	term := endingTerm{reasonTerm{newFakeTerm("ending"), "idle_timeout"}, web.SessionStatus{Agent: "idle"}}
	base := startDashboard(t, testOperator(newBroker(), newDirectory()), oneSession{term})
	ctx := openDashboard(t, base)
	if err := chromedp.Do(ctx, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() === "live" && window.tandem.typing && !document.getElementById("strip").hidden`)
	before, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.querySelector(".strip .mode").textContent,
		String(document.getElementById("admit").checkVisibility())]`))
	if err != nil {
		t.Fatal(err)
	}
	if before[0] != "you may type" || before[1] != "true" {
		t.Fatalf("the live operator page: mode %q, typing link visible %s", before[0], before[1])
	}
	term.end()
	poll(t, ctx, `window.tandem.status() === "ended"`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`({
		mode: document.querySelector(".strip .mode").textContent,
		admit: String(document.getElementById("admit").checkVisibility()),
		agent: document.getElementById("agent-state").textContent,
		stdin: String(window.tandem.term.options.disableStdin),
		typing: String(window.tandem.typing),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"mode": "nobody can type: the session ended", "admit": "false",
		"agent": "Session ended: idle_timeout", "stdin": "true", "typing": "false"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("after the end, %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestBrowserMarkLegend: the live page's strip explains its command marks:
// one swatch each for the agent's command, a human's and a failed one,
// drawn like the marks themselves.
func TestBrowserMarkLegend(t *testing.T) {
	term := statusTerm{newFakeTerm("legend"), web.SessionStatus{Agent: "idle"}}
	ctx := openTerminal(t, startServer(t, oneSession{term}))
	poll(t, ctx, `!document.getElementById("strip").hidden`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const legend = document.getElementById("legend");
		const style = sel => { const e = legend.querySelector(sel); return e ? getComputedStyle(e).borderLeftColor + " " + getComputedStyle(e).borderLeftStyle : "none"; };
		return [String(legend.checkVisibility()), legend.textContent.replace(/\s+/g, " ").trim(),
			style(".swatch.agent"), style(".swatch.human"), style(".swatch.failed")];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != "true" || got[1] != "agent's command human's command failed (exit not 0)" {
		t.Errorf("legend visible %s, text %q", got[0], got[1])
	}
	for i, want := range []string{"rgb(88, 166, 255) solid", "rgb(210, 153, 34) solid", "double"} {
		if !strings.Contains(got[2+i], want) {
			t.Errorf("swatch %d is drawn %q, want %q like its mark", i, got[2+i], want)
		}
	}
}

// TestDashboardEndedSessionsSayWhy: the dashboard's ended sessions show why
// each ended, in words with tandem's code, and a reason it does not know
// as text.
func TestDashboardEndedSessionsSayWhy(t *testing.T) {
	idle, odd := endedRow, endedRow
	idle.EndReason = "idle_timeout"
	odd.ID, odd.EndReason, odd.EndedAt = "s9", `<img src=x onerror=alert(1)>`, time.Now().Add(-3*time.Hour)
	base := startDashboard(t, testOperator(newBroker(), newDirectory(idle, odd)), sessions{})
	ctx := openDashboard(t, base)
	for id, want := range map[string]string{"s0": "idle for too long (idle_timeout)", "s9": odd.EndReason} {
		poll(t, ctx, fmt.Sprintf(`(() => { const r = document.querySelector('#ended tr[data-id="%s"]');
			return r && r.checkVisibility() && [...r.cells].some(c => c.textContent === %s); })()`, id, strconv.Quote(want)))
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.images.length + document.querySelectorAll("[onerror]").length`))
	if err != nil || n != 0 {
		t.Errorf("the page made markup of a reason: %d (%v)", n, err)
	}
}
