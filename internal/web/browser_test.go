package web_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
	"github.com/tandem-sh/tandem/internal/web"
)

// textarea is where xterm.js takes keyboard input.
const textarea = chromedp.CSS(".xterm-helper-textarea")

// openTerminal starts a browser on the monitoring page of testKey and waits
// until the page is live and shows the scrollback.
func openTerminal(t *testing.T, base string) context.Context {
	t.Helper()
	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(web.MonitorURL(base, testKey))); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	poll(t, ctx, `window.tandem && window.tandem.status() === "live"`)
	waitText(t, ctx, "previous output")
	return ctx
}

// poll waits until the JavaScript expression is truthy in the page.
func poll(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(waitTimeout)))
	if err != nil {
		screen, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`window.tandem ? window.tandem.text().trimEnd() : "(no window.tandem)"`))
		t.Fatalf("waiting for %s: %v\nscreen:\n%s", expr, err, screen)
	}
}

// waitText waits until the terminal's buffer contains s.
func waitText(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	poll(t, ctx, fmt.Sprintf(`window.tandem.text().includes(%s)`, strconv.Quote(s)))
}

func TestBrowserTypingReachesTerminal(t *testing.T) {
	term := newFakeTerm("typing")
	ctx := openTerminal(t, startServer(t, sessions{testKey: term}))

	if err := chromedp.Do(ctx, chromedp.Focus(textarea), testenv.TypeKeys("echo hi\n")); err != nil {
		t.Fatalf("type: %v", err)
	}
	term.waitInput(t, "echo hi\r")
	waitText(t, ctx, "echo hi")

	if err := chromedp.Do(ctx, chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl))); err != nil {
		t.Fatalf("Ctrl-C: %v", err)
	}
	term.waitInput(t, "\x03")
	if input, _ := term.snapshot(); input != "echo hi\r\x03" {
		t.Errorf("input = %q, want each key once", input)
	}

	term.emit("\x1b[32mgreen output\x1b[0m\r\n")
	waitText(t, ctx, "green output")
}

func TestBrowserResize(t *testing.T) {
	term := newFakeTerm("resize")
	ctx := openTerminal(t, startServer(t, sessions{testKey: term}))
	term.waitFor(t, "the first fit", func() bool { return len(term.sizes) > 0 })
	_, sizes := term.snapshot()
	first := sizes[len(sizes)-1]

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(480, 320)); err != nil {
		t.Fatalf("resize viewport: %v", err)
	}
	term.waitFor(t, "a smaller size", func() bool {
		last := term.sizes[len(term.sizes)-1]
		return last[0] < first[0] && last[1] < first[1]
	})
	_, sizes = term.snapshot()
	last := sizes[len(sizes)-1]
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[2]int](`[window.tandem.term.cols, window.tandem.term.rows]`))
	if err != nil || got != last {
		t.Errorf("xterm is %v (%v); the terminal was told %v", got, err, last)
	}
}

func TestBrowserEscapesName(t *testing.T) {
	const name = `<img src=x onerror=alert(1)>`
	ctx := openTerminal(t, startServer(t, sessions{testKey: newFakeTerm(name)}))
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("name").textContent, document.title, String(document.images.length)]`))
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != name || got[1] != name+" · tandem" || got[2] != "0" {
		t.Errorf("name %q, title %q, %s images; want the name as literal text and no image", got[0], got[1], got[2])
	}
}

func TestBrowserSessionEnded(t *testing.T) {
	term := newFakeTerm("ending")
	ctx := openTerminal(t, startServer(t, sessions{testKey: term}))
	term.end()
	poll(t, ctx, `document.getElementById("status").textContent === "session ended"`)
	waitText(t, ctx, "[session ended]")
	visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("status").checkVisibility()`))
	if err != nil || !visible {
		t.Errorf("status visible = %v, %v; want true", visible, err)
	}
}

// reasonTerm is a fake terminal that says why its session ended.
type reasonTerm struct {
	*fakeTerm
	reason string
}

type reasonSessions map[string]reasonTerm

func (s reasonSessions) Terminal(key string) (web.Terminal, bool) {
	t, ok := s[key]
	return t, ok
}

func (r reasonTerm) EndReason() string {
	select {
	case <-r.ended:
		return r.reason
	default:
		return ""
	}
}

// TestBrowserSessionEndedReason: an ended session's page says why it
// ended, and links to its replay (the same URL, now a recording).
func TestBrowserSessionEndedReason(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			term := reasonTerm{newFakeTerm("ending"), "idle_timeout"}
			ctx := openTerminal(t, startServer(t, reasonSessions{testKey: term}))
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.w, vp.h)); err != nil {
				t.Fatal(err)
			}
			sessionEndedReason(t, ctx, term)
		})
	}
}

func sessionEndedReason(t *testing.T, ctx context.Context, term reasonTerm) {
	term.end()
	poll(t, ctx, `document.getElementById("status").textContent === "session ended: idle_timeout"`)
	waitText(t, ctx, "[session ended: idle_timeout]")
	poll(t, ctx, `!document.getElementById("replay").hidden && new URL(document.getElementById("replay").href).pathname === location.pathname`)
}

func TestBrowserTwoViewers(t *testing.T) {
	term := newFakeTerm("shared")
	base := startServer(t, sessions{testKey: term})
	a := openTerminal(t, base)
	b := openTerminal(t, base)
	term.waitFor(t, "two watchers", func() bool { return term.watchers == 2 })

	term.emit("from the agent\r\n")
	waitText(t, a, "from the agent")
	waitText(t, b, "from the agent")

	if err := chromedp.Do(a, chromedp.Focus(textarea), testenv.TypeKeys("typed in a")); err != nil {
		t.Fatalf("type: %v", err)
	}
	term.waitInput(t, "typed in a")
	waitText(t, b, "typed in a")
}

func TestBrowserRendersUnderCSP(t *testing.T) {
	ctx := openTerminal(t, startServer(t, sessions{testKey: newFakeTerm("csp")}))
	// xterm.js colours and sizes its rows through <style> elements it adds at
	// run time. A policy that blocks them leaves each element without a sheet,
	// and the terminal without colours or a monospace font.
	blocked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("style")].filter(s => !s.sheet).map(s => s.textContent.slice(0, 60))`))
	if err != nil || len(blocked) > 0 {
		t.Errorf("style elements blocked by the page's policy: %q (%v)", blocked, err)
	}
}

func TestBrowserReconnect(t *testing.T) {
	term := newFakeTerm("flaky")
	ctx := openTerminal(t, startServer(t, sessions{testKey: term}))
	term.breakWatchers()
	poll(t, ctx, `window.tandem.status() === "disconnected" && !document.getElementById("reconnect").hidden`)

	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("reconnect"))); err != nil {
		t.Fatalf("click reconnect: %v", err)
	}
	poll(t, ctx, `window.tandem.status() === "live"`)
	waitText(t, ctx, "previous output")
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`window.tandem.text().split("previous output").length - 1`))
	if err != nil || n != 1 {
		t.Errorf("scrollback shown %d times (%v) after reconnecting, want once", n, err)
	}
}

// TestBrowserAnswersNoQueries: a program that asks the terminal something
// (cursor position, device attributes, colours, modes) gets no answer from
// a viewer: the answer would arrive as typed input, on the human's command
// line (issue 6 item 9).
func TestBrowserAnswersNoQueries(t *testing.T) {
	term := newFakeTerm("queries")
	ctx := openTerminal(t, startServer(t, sessions{testKey: term}))
	queries := []string{
		"\x1b[6n", "\x1b[5n", "\x1b[?6n", "\x1b[c", "\x1b[0c", "\x1b[>c", "\x1b[=c",
		"\x1b[?1;2$p", "\x1b[4$p", "\x1b[>q", "\x1b[14t", "\x1b[18t", "\x1b[?u",
		"\x1bP$qm\x1b\\", "\x1bP+q544e\x1b\\", "\x1b]10;?\x07", "\x1b]11;?\x1b\\", "\x1b]4;1;?\x07",
		"\x1b[?1004h",
	}
	for _, q := range queries {
		term.emit(q)
	}
	term.emit("queries sent\r\n")
	waitText(t, ctx, "queries sent")
	// Focus changes would report if mode 1004 took.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.tandem.term.blur(); window.tandem.term.focus()`)); err != nil {
		t.Fatal(err)
	}
	// A typed key after the queries proves input flows: everything before
	// it in the input would be an answer.
	if err := chromedp.Do(ctx, chromedp.Focus(textarea), testenv.TypeKeys("z")); err != nil {
		t.Fatalf("type: %v", err)
	}
	term.waitInput(t, "z")
	if input, _ := term.snapshot(); input != "z" {
		t.Fatalf("the page typed %q for program output", input)
	}
}

// statusTerm is a fake terminal whose status strip shows a fixed status.
type statusTerm struct {
	*fakeTerm
	st web.SessionStatus
}

func (s statusTerm) Status() web.SessionStatus           { return s.st }
func (s statusTerm) WatchStatus(fn func()) (stop func()) { return func() {} }

// oneSession serves one terminal of any kind under testKey.
type oneSession struct{ t web.Terminal }

func (o oneSession) Terminal(key string) (web.Terminal, bool) { return o.t, key == testKey }

// TestBrowserStripKeepsTheTerminal: the strip shows a running command on
// one line, however long: a pasted block of 300 lines once grew the strip
// over the terminal, which shrank to one row, and bash's line editor then
// scrolled every long line sideways for the rest of the session.
func TestBrowserStripKeepsTheTerminal(t *testing.T) {
	plain := openTerminal(t, startServer(t, sessions{testKey: newFakeTerm("plain")}))
	rows, err := chromedp.Run(plain, chromedp.Evaluate[int](`window.tandem.term.rows`))
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, 300)
	for i := range lines {
		lines[i] = fmt.Sprintf("echo pasted-line-%d", i)
	}
	long := statusTerm{newFakeTerm("long"), web.SessionStatus{Agent: "human_running", Command: strings.Join(lines, "\n"), Since: time.Now()}}
	ctx := openTerminal(t, startServer(t, oneSession{long}))
	poll(t, ctx, `document.getElementById("agent-state").textContent.includes("pasted-line-0")`)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[document.getElementById("agent-state").textContent, String(window.tandem.term.rows)]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "A human command runs: echo pasted-line-0 … (300 lines)"; !strings.HasPrefix(got[0], want) || strings.Contains(got[0], "pasted-line-1") {
		t.Errorf("the strip says %.300q, want %q and the time", got[0], want)
	}
	if n, _ := strconv.Atoi(got[1]); n < rows-3 {
		t.Errorf("the terminal has %d rows beside the strip, %d without it", n, rows)
	}
}
