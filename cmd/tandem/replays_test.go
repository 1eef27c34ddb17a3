package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tandem-sh/tandem/internal/testenv"
)

// TestDashboardListsEarlierRecordings: a session recorded by an earlier
// tandem on the same data dir is listed among the ended sessions of the
// next one's dashboard, beside this one's, above a long audit log: at
// 1280×800 its replay link is on the first screen, and it opens the
// replay, by session id, for the signed-in operator. Without the operator
// token the replay page and its recording are refused, whatever the id.
func TestDashboardListsEarlierRecordings(t *testing.T) {
	home := t.TempDir()
	first := startServer(t, serverOpts{home: home})
	tok := str(mustOK(t, first.call(t, "ssh_connect", map[string]any{"name": "earlier"}))["sessionToken"])
	mustOK(t, sess{first, "earlier", tok}.exec(t, "echo from-the-first-tandem"))
	mustOK(t, first.call(t, "ssh_disconnect", map[string]any{"sessionName": "earlier", "sessionToken": tok}))
	_ = first.cs.Close()
	first.waitExit(t, 20*time.Second)

	srv := startServer(t, serverOpts{home: home})
	tok = str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "now"}))["sessionToken"])
	mustOK(t, sess{srv, "now", tok}.exec(t, "echo from-this-tandem"))
	mustOK(t, srv.call(t, "ssh_disconnect", map[string]any{"sessionName": "now", "sessionToken": tok}))
	for range 200 { // a long audit log below
		mustOK(t, srv.call(t, "ssh_list_sessions", map[string]any{}))
	}

	op := newOperatorClient(t, srv)
	ids := map[string]string{}
	for _, r := range op.do(t, http.MethodGet, "/api/state", "")["sessions"].([]any) {
		row := r.(map[string]any)
		if row["ended"] == true {
			ids[str(row["name"])] = str(row["id"])
			if want := "/replays/" + str(row["id"]); row["replay"] != want {
				t.Errorf("ended session %v: replay %v, want %s", row["name"], row["replay"], want)
			}
		}
	}
	if ids["earlier"] == "" || ids["now"] == "" {
		t.Fatalf("the ended sessions listed: %v", ids)
	}
	early := ids["earlier"]

	// Nobody but the operator gets the replay: not without the cookie, not
	// with a wrong token, and an unknown id is refused alike.
	for _, tc := range []struct {
		name, path, cookie, bearer string
		want                       int
	}{
		{"page without the token", "/replays/" + early, "", "", http.StatusUnauthorized},
		{"cast without the token", "/replays/" + early + "/cast", "", "", http.StatusNotFound},
		{"cast with a wrong cookie", "/replays/" + early + "/cast", strings.Repeat("x", 43), "", http.StatusNotFound},
		{"cast with a wrong bearer", "/replays/" + early + "/cast", "", strings.Repeat("y", 43), http.StatusNotFound},
		{"unknown id", "/replays/0123456789abcdef/cast", op.token, "", http.StatusNotFound},
		{"live session's name as id", "/replays/now/cast", op.token, "", http.StatusNotFound},
		{"the operator's cookie", "/replays/" + early + "/cast", op.token, "", http.StatusOK},
		{"the operator's bearer token", "/replays/" + early + "/cast", "", op.token, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, op.base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.cookie != "" {
				req.AddCookie(&http.Cookie{Name: "tandem_operator", Value: tc.cookie})
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s: %s, want %d", tc.path, resp.Status, tc.want)
			}
			has := strings.Contains(string(body), "from-the-first-tandem") || strings.Contains(string(body), "earlier")
			if has != (tc.want == http.StatusOK) {
				t.Errorf("%s: the body tells of the session: %v (%.200q)", tc.path, has, body)
			}
		})
	}

	ctx := testenv.Browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(dashboardLink(t, srv.dataDir))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `String(document.querySelectorAll('#audit tbody tr').length)`, "100")
	link := fmt.Sprintf(`document.querySelector('#ended tr[data-id=%s] a.replay-link')`, strconv.Quote(early))
	waitPage(t, ctx, `String(!!`+link+`)`, "true")
	// On the first screen: inside the viewport, the page not scrolled.
	waitPage(t, ctx, `(() => { const r = `+link+`.getBoundingClientRect();
		return String(scrollY === 0 && innerHeight === 800 && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight); })()`, "true")
	href, err := chromedp.Run(ctx, chromedp.Evaluate[string](link+`.href`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(href), chromedp.WaitReady(chromedp.ID("speed")),
		chromedp.SetValue(chromedp.ID("speed"), "instant"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("speed").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, `document.getElementById("name").textContent`, "earlier")
	waitScreen(t, ctx, func(s string) bool { return contains(s, "from-the-first-tandem") })
}
