package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/approval"
	"github.com/tandem-sh/tandem/internal/web"
)

func TestDashboardURL(t *testing.T) {
	for _, tc := range []struct{ base, token, want string }{
		{"http://127.0.0.1:7777", "abc", "http://127.0.0.1:7777/?token=abc"},
		{"http://127.0.0.1:7777/", "abc", "http://127.0.0.1:7777/?token=abc"},
		{"http://[::1]:80", "a+b/c=&d", "http://[::1]:80/?token=a%2Bb%2Fc%3D%26d"},
	} {
		if got := web.DashboardURL(tc.base, tc.token); got != tc.want {
			t.Errorf("DashboardURL(%q, %q) = %q, want %q", tc.base, tc.token, got, tc.want)
		}
	}
}

// TestDashboardLogin: the link signs the browser in with a cookie and
// takes the token out of the address bar; the cookie then opens the page.
func TestDashboardLogin(t *testing.T) {
	base := startDashboard(t, testOperator(newBroker(), newDirectory(liveRow)), sessions{})
	resp, err := noRedirect.Get(web.DashboardURL(base, operatorToken))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d, Location %q; want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := resp.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("sign-in Cache-Control = %q, want no-store", got)
	}
	raw := resp.Header.Values("Set-Cookie")
	if len(raw) != 1 {
		t.Fatalf("Set-Cookie = %q, want one cookie", raw)
	}
	for _, want := range []string{"tandem_operator=" + operatorToken, "Path=/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(raw[0], want) {
			t.Errorf("Set-Cookie %q lacks %s", raw[0], want)
		}
	}
	if strings.Contains(raw[0], "Secure") || strings.Contains(raw[0], "Max-Age") || strings.Contains(raw[0], "Expires") {
		t.Errorf("Set-Cookie %q: want a session cookie, not Secure over plain HTTP", raw[0])
	}
	c := resp.Cookies()[0]

	req, _ := http.NewRequest("GET", base+"/", nil)
	req.AddCookie(c)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page := body(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / with the cookie: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for header, want := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
		if got := resp.Header.Get(header); got != want {
			t.Errorf("%s = %q, want %q", header, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self';") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	for _, want := range []string{"Pending approvals", "Recently decided", "Live sessions", "Ended sessions", `<script src="/assets/dashboard.js" defer>`} {
		if !strings.Contains(page, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	// The page holds no data: the script fetches it.
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("dashboard has %d script elements, want only dashboard.js", n)
	}
	for _, secret := range []string{testKey, "deploy-box", operatorToken} {
		if strings.Contains(page, secret) {
			t.Errorf("dashboard page contains %q", secret)
		}
	}
	if strings.Contains(page, "audit-filter") {
		t.Errorf("dashboard without an audit log shows the audit panel")
	}
}

func TestDashboardLoginSecureOverTLS(t *testing.T) {
	srv := web.New(sessions{}, &web.Options{Logger: testLogger(t), Operator: testOperator(newBroker(), newDirectory())})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", web.DashboardURL("https://127.0.0.1", operatorToken), nil))
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly ||
		cookies[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("sign-in over TLS: %d, cookies %+v; want a Secure, HttpOnly, SameSite=Strict cookie", rec.Code, cookies)
	}
}

// TestDashboardRefusesWrongToken: without the right token or cookie, / says
// where the link comes from, sets nothing and names no session.
func TestDashboardRefusesWrongToken(t *testing.T) {
	base := startDashboard(t, testOperator(newBroker(), newDirectory(web.SessionRow{ID: "s9", Name: "secret-session-name"})), sessions{})
	for _, rq := range []request{
		{path: "/?token=wrong", cookie: "-"},
		{path: "/?token=", cookie: "-"},
		{path: "/?token=" + operatorToken + "x", cookie: "-"},
		{path: "/", cookie: "-"},
		{path: "/", cookie: "wrong"},
		{path: "/", cookie: operatorToken[:len(operatorToken)-1]},
	} {
		status, page, _ := rq.do(t, base)
		if status != http.StatusUnauthorized {
			t.Errorf("GET %s (cookie %q): %d, want 401", rq.path, rq.cookie, status)
		}
		if !strings.Contains(page, "tandem dashboard-url") {
			t.Errorf("GET %s: the page does not say where the link comes from:\n%s", rq.path, page)
		}
		for _, secret := range []string{"secret-session-name", testKey, operatorToken} {
			if strings.Contains(page, secret) {
				t.Errorf("GET %s: page reveals %q", rq.path, secret)
			}
		}
	}
	resp, err := noRedirect.Get(base + "/?token=wrong")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("a wrong token set cookies %q", c)
	}
}

// TestDashboardAPIRequiresCookie: every /api/ route answers 401 JSON
// without the operator cookie, before anything else.
func TestDashboardAPIRequiresCookie(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, &web.Operator{Token: operatorToken, Approvals: b, Sessions: newDirectory(liveRow), Audit: &fakeAudit{}}, sessions{})
	res := ask(t, b, testAction("rm -rf build"))
	id := waitPending(t, b, 1)[0].ID
	for _, cookie := range []string{"-", "wrong"} {
		for _, rq := range []request{
			{path: "/api/state"},
			{path: "/api/audit"},
			{path: "/api/ws"},
			{path: "/api/nope"},
			{method: "POST", path: "/api/approvals/" + id + "/decision", body: `{"approve":true}`},
			{method: "POST", path: "/api/sessions/s1/watch", body: `{}`},
		} {
			rq.cookie = cookie
			status, raw, m := rq.do(t, base)
			if status != http.StatusUnauthorized || m["success"] != false || m["error"] != "unauthenticated" || m["message"] == "" {
				t.Errorf("%s %s (cookie %q): %d %s; want 401 unauthenticated", rq.method, rq.path, cookie, status, raw)
			}
			if strings.Contains(raw, testKey) || strings.Contains(raw, "deploy-box") {
				t.Errorf("%s %s: the refusal reveals a session: %s", rq.method, rq.path, raw)
			}
		}
	}
	if p := b.Pending(); len(p) != 1 {
		t.Errorf("an unauthenticated decision was made: %d pending", len(p))
	}
	select {
	case o := <-res:
		t.Errorf("the request ended: %+v", o)
	default:
	}
}

// TestDashboardPostChecks: a POST must come from the page's own origin
// (403 otherwise) with a JSON body (415), of bounded size (413).
func TestDashboardPostChecks(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	ask(t, b, testAction("rm -rf build"))
	id := waitPending(t, b, 1)[0].ID
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	decide := "/api/approvals/" + id + "/decision"
	for _, origin := range []string{"", "http://evil.example", "null", "http://127.0.0.1:1", "http://localhost:" + port,
		"ftp://127.0.0.1:" + port, base + "/path", "http://user@127.0.0.1:" + port} {
		for _, path := range []string{decide, "/api/sessions/s1/watch"} {
			status, raw, m := request{method: "POST", path: path, body: `{"approve":true}`, header: map[string]string{"Origin": origin}}.do(t, base)
			if status != http.StatusForbidden || m["error"] != "cross_origin" {
				t.Errorf("POST %s from Origin %q: %d %s; want 403 cross_origin", path, origin, status, raw)
			}
			if strings.Contains(raw, testKey) {
				t.Errorf("a cross-origin watch got the key: %s", raw)
			}
		}
	}
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"} {
		status, raw, m := request{method: "POST", path: decide, body: `{"approve":true}`, header: map[string]string{"Content-Type": ct}}.do(t, base)
		if status != http.StatusUnsupportedMediaType || m["error"] != "unsupported_media_type" {
			t.Errorf("POST with Content-Type %q: %d %s; want 415", ct, status, raw)
		}
	}
	big := `{"approve":true,"reason":"` + strings.Repeat("x", 70<<10) + `"}`
	if status, raw, _ := (request{method: "POST", path: decide, body: big}).do(t, base); status != http.StatusRequestEntityTooLarge {
		t.Errorf("POST of %d bytes: %d %s; want 413", len(big), status, raw)
	}
	if p := b.Pending(); len(p) != 1 {
		t.Fatalf("a refused POST decided: %d pending", len(p))
	}
	// The same request, from the page's origin with a charset, is decided.
	status, raw, _ := request{method: "POST", path: decide, body: `{"approve":false}`,
		header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}.do(t, base)
	if status != http.StatusOK {
		t.Errorf("POST from the page's origin: %d %s", status, raw)
	}
}

// TestDashboardDecisions: approve, deny with a reason, approve and
// remember, and the errors of each.
func TestDashboardDecisions(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	post := func(id, body string) (int, map[string]any) {
		t.Helper()
		status, _, m := request{method: "POST", path: "/api/approvals/" + id + "/decision", body: body}.do(t, base)
		return status, m
	}

	res := ask(t, b, testAction("rm -rf build"))
	id := waitPending(t, b, 1)[0].ID
	for _, bad := range []struct{ body, code string }{
		{`{"reason":"no verdict"}`, "bad_request"},
		{`{"approve":"yes"}`, "bad_request"},
		{`not json`, "bad_request"},
		{`{"approve":false,"reason":"` + strings.Repeat("é", 1001) + `"}`, "reason_too_long"},
		{`{"approve":true,"rememberMinutes":-1}`, "bad_request"},
		{`{"approve":true,"rememberMinutes":100000}`, "bad_request"},
	} {
		if status, m := post(id, bad.body); status != http.StatusBadRequest || m["error"] != bad.code {
			t.Errorf("decision %.40s: %d %v; want 400 %s", bad.body, status, m, bad.code)
		}
	}
	status, m := post(id, `{"approve":true,"reason":"looks fine"}`)
	a, _ := m["approval"].(map[string]any)
	d, _ := a["decision"].(map[string]any)
	if status != http.StatusOK || m["success"] != true || a["status"] != "approved" || d["by"] != "dashboard" ||
		d["approver"] != "operator" || d["reason"] != "looks fine" || d["rememberMs"] != nil {
		t.Errorf("approve: %d %v", status, m)
	}
	if o := <-res; o.err != nil || o.Kind != approval.Run {
		t.Errorf("approved request returned %+v", o)
	}

	// The second answer loses, and is told who won.
	status, m = post(id, `{"approve":false}`)
	a, _ = m["approval"].(map[string]any)
	if status != http.StatusConflict || m["success"] != false || m["error"] != "approval_decided" || a["status"] != "approved" || a["id"] != id {
		t.Errorf("second decision: %d %v; want 409 approval_decided with the approved approval", status, m)
	}
	if status, m := post("apr_nosuch", `{"approve":true}`); status != http.StatusNotFound || m["error"] != "approval_not_found" {
		t.Errorf("unknown approval: %d %v", status, m)
	}

	// A deny needs no reason, and passes one on: 1000 characters at most.
	res = ask(t, b, testAction("rm -rf /"))
	id = waitPending(t, b, 1)[0].ID
	reason := strings.Repeat("é", 1000)
	if status, m := post(id, `{"approve":false,"reason":"`+reason+`","rememberMinutes":5}`); status != http.StatusOK {
		t.Errorf("deny: %d %v", status, m)
	}
	if o := <-res; o.Kind != approval.Refused || o.Approval.Decision.Reason != reason || o.Approval.Decision.Remember != 0 {
		t.Errorf("denied request returned %+v", o)
	}
	res = ask(t, b, testAction("rm -rf tmp"))
	id = waitPending(t, b, 1)[0].ID
	if status, m := post(id, `{"approve":false}`); status != http.StatusOK {
		t.Errorf("deny without a reason: %d %v", status, m)
	}
	if o := <-res; o.Kind != approval.Refused || o.Approval.Decision.Reason != "" {
		t.Errorf("denied request returned %+v", o)
	}

	// Approve and remember: the identical call runs again without asking.
	act := testAction("make deploy")
	res = ask(t, b, act)
	id = waitPending(t, b, 1)[0].ID
	status, raw, _ := request{method: "POST", path: "/api/approvals/" + id + "/decision", body: `{"approve":true,"rememberMinutes":5}`}.do(t, base)
	var reply struct{ Approval approval.Approval }
	if err := json.Unmarshal([]byte(raw), &reply); err != nil || status != http.StatusOK ||
		reply.Approval.Decision == nil || reply.Approval.Decision.Remember != 5*time.Minute {
		t.Errorf("approve and remember: %d %s (%v)", status, raw, err)
	}
	if o := <-res; o.Kind != approval.Run || o.Approval.Decision.Remember != 5*time.Minute {
		t.Errorf("remembered request returned %+v", o)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if o, err := b.Request(ctx, act, "", "", time.Millisecond, nil); err != nil || o.Kind != approval.Run || !o.Remembered {
		t.Errorf("identical request after remember: %+v %v; want Run, Remembered", o, err)
	}
}

// TestDashboardState: the state lists approvals and sessions but no
// monitoring key; the key comes only from watch.
func TestDashboardState(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow, endedRow)), sessions{})
	status, raw, _ := request{path: "/api/state"}.do(t, base)
	if status != http.StatusOK || !strings.Contains(raw, `"pending":[]`) || !strings.Contains(raw, `"recent":[]`) {
		t.Fatalf("state: %d %s", status, raw)
	}
	ask(t, b, testAction("rm -rf build"))
	waitPending(t, b, 1)
	status, raw, _ = request{path: "/api/state"}.do(t, base)
	if status != http.StatusOK {
		t.Fatalf("state: %d %s", status, raw)
	}
	var st struct {
		Now      time.Time
		Pending  []approval.Approval
		Recent   []approval.Approval
		Sessions []web.SessionRow
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pending) != 1 || st.Pending[0].Action != testAction("rm -rf build") || st.Pending[0].Rule != "rules[2]" ||
		len(st.Recent) != 0 || len(st.Sessions) != 2 || st.Sessions[0].Name != "deploy-box" || !st.Sessions[1].Ended ||
		time.Since(st.Now) > time.Minute {
		t.Errorf("state = %s", raw)
	}
	if strings.Contains(raw, testKey) || strings.Contains(raw, "/s/") {
		t.Errorf("state holds a monitoring key: %s", raw)
	}

	var m map[string]any
	for _, id := range []string{"s1", "s0"} {
		status, raw, m = request{method: "POST", path: "/api/sessions/" + id + "/watch", body: `{}`}.do(t, base)
		if status != http.StatusOK || m["success"] != true || m["url"] != "/s/"+testKey {
			t.Errorf("watch %s: %d %s", id, status, raw)
		}
	}
	// The page sends {}; an empty body does as well.
	if status, raw, _ = (request{method: "POST", path: "/api/sessions/s1/watch"}).do(t, base); status != http.StatusOK {
		t.Errorf("watch with an empty body: %d %s", status, raw)
	}
	status, raw, m = request{method: "POST", path: "/api/sessions/nosuch/watch", body: `{}`}.do(t, base)
	if status != http.StatusNotFound || m["error"] != "session_not_found" {
		t.Errorf("watch of an unknown session: %d %s", status, raw)
	}
	for _, rq := range []request{{path: "/api/sessions/s1/watch"}, {method: "POST", path: "/api/state", body: `{}`}, {path: "/api/"}} {
		if status, raw, _ := rq.do(t, base); status != http.StatusNotFound || strings.Contains(raw, testKey) {
			t.Errorf("%s %s: %d %s; want 404", rq.method, rq.path, status, raw)
		}
	}
}

func TestDashboardAudit(t *testing.T) {
	audit := &fakeAudit{records: []web.AuditEntry{
		{Seq: 2, Time: time.Now(), Tenant: "acme", Actor: "build-bot", SessionName: "deploy-box", Tool: "ssh_exec", Event: "approval", Outcome: "denied", Reason: "not now", ApprovalID: "apr_1"},
		{Seq: 1, Time: time.Now(), Tenant: "acme", Tool: "ssh_connect", Event: "tool", Outcome: "ok"},
	}}
	op := testOperator(newBroker(), newDirectory())
	op.Audit = audit
	base := startDashboard(t, op, sessions{})

	status, raw, m := request{path: "/api/audit?session=deploy-box&tenant=acme&tool=ssh_exec&outcome=denied"}.do(t, base)
	records, _ := m["records"].([]any)
	if status != http.StatusOK || m["success"] != true || len(records) != 2 || !strings.Contains(raw, `"approvalId":"apr_1"`) {
		t.Errorf("audit: %d %s", status, raw)
	}
	if got, want := audit.lastQuery(), (web.AuditQuery{Session: "deploy-box", Tenant: "acme", Tool: "ssh_exec", Outcome: "denied", Limit: 100}); got != want {
		t.Errorf("query = %+v, want %+v", got, want)
	}
	for limit, want := range map[string]int{"": 100, "0": 100, "7": 7, "500": 500, "501": 500, "100000": 500} {
		if status, raw, _ := (request{path: "/api/audit?limit=" + limit}).do(t, base); status != http.StatusOK || audit.lastQuery().Limit != want {
			t.Errorf("limit=%s: %d %s, Limit %d; want %d", limit, status, raw, audit.lastQuery().Limit, want)
		}
	}
	if status, raw, _ := (request{path: "/api/audit?before=42"}).do(t, base); status != http.StatusOK || audit.lastQuery().Before != 42 {
		t.Errorf("before=42: %d %s, Before %d", status, raw, audit.lastQuery().Before)
	}
	for _, q := range []string{"limit=x", "limit=-1", "tool=" + strings.Repeat("x", 201), "before=0", "before=-3", "before=x"} {
		if status, raw, _ := (request{path: "/api/audit?" + q}).do(t, base); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s; want 400", q, status, raw)
		}
	}
	if _, page, _ := (request{path: "/"}).do(t, base); !strings.Contains(page, `id="audit-filter"`) {
		t.Errorf("the dashboard with an audit log lacks its panel")
	}

	// Without an audit log there is none to search.
	base = startDashboard(t, testOperator(newBroker(), newDirectory()), sessions{})
	if status, raw, m := (request{path: "/api/audit"}).do(t, base); status != http.StatusNotFound || m["error"] != "audit_unavailable" {
		t.Errorf("audit without a log: %d %s", status, raw)
	}
}

// TestDashboardOff: without an Operator, / explains tandem as before and
// /api/ does not exist.
func TestDashboardOff(t *testing.T) {
	base := startServer(t, sessions{testKey: newFakeTerm("s")})
	for _, rq := range []request{{path: "/"}, {path: "/?token=" + operatorToken}} {
		status, page, _ := rq.do(t, base)
		if status != http.StatusOK || !strings.Contains(page, "lists no sessions") {
			t.Errorf("GET %s: %d, want the explanation", rq.path, status)
		}
	}
	resp, err := noRedirect.Get(web.DashboardURL(base, operatorToken))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := resp.Header.Values("Set-Cookie"); len(c) != 0 {
		t.Errorf("no dashboard, yet a cookie: %q", c)
	}
	for _, rq := range []request{
		{path: "/api/state"}, {path: "/api/ws"}, {path: "/api/audit"},
		{method: "POST", path: "/api/approvals/x/decision", body: `{"approve":true}`},
		{method: "POST", path: "/api/sessions/s1/watch", body: `{}`},
	} {
		if status, _, _ := rq.do(t, base); status != http.StatusNotFound {
			t.Errorf("%s %s without a dashboard: %d, want 404", rq.method, rq.path, status)
		}
	}
}

func TestNewChecksOperator(t *testing.T) {
	b, d := newBroker(), newDirectory()
	for name, op := range map[string]*web.Operator{
		"no token":         {Approvals: b, Sessions: d},
		"token with space": {Token: "a b", Approvals: b, Sessions: d},
		"token with ;":     {Token: "a;b", Approvals: b, Sessions: d},
		"no approvals":     {Token: operatorToken, Sessions: d},
		"no sessions":      {Token: operatorToken, Approvals: b},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			web.New(sessions{}, &web.Options{Operator: op})
		}()
	}
}

// TestDashboardBearer: an upstream approver answering later sends the
// operator token as a bearer token, with no cookie and no Origin; a wrong
// bearer token is refused even beside the right cookie.
func TestDashboardBearer(t *testing.T) {
	b := newBroker()
	base := startDashboard(t, testOperator(b, newDirectory(liveRow)), sessions{})
	ask(t, b, testAction("make deploy"))
	id := waitPending(t, b, 1)[0].ID
	decide := "/api/approvals/" + id + "/decision"
	status, raw, m := request{method: "POST", path: decide, body: `{"approve":true}`,
		header: map[string]string{"Authorization": "Bearer wrong", "Origin": ""}}.do(t, base)
	if status != http.StatusUnauthorized || m["error"] != "unauthenticated" {
		t.Fatalf("wrong bearer beside the right cookie: %d %s", status, raw)
	}
	status, raw, _ = request{method: "POST", path: decide, body: `{"approve":true,"reason":"upstream says yes"}`, cookie: "-",
		header: map[string]string{"Authorization": "Bearer " + operatorToken, "Origin": ""}}.do(t, base)
	if status != http.StatusOK {
		t.Fatalf("bearer decision: %d %s", status, raw)
	}
	if a, ok := b.Get(id); !ok || a.Status != approval.Approved {
		t.Fatalf("after the bearer decision: %+v", a)
	}
}
