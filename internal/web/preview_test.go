package web_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/web"
)

// fakePreviews forwards the ports listed, per key, and names the ticket
// URL after what it was asked.
type fakePreviews map[string][]int

func (f fakePreviews) Ports(key string) []int { return f[key] }

func (f fakePreviews) Enter(key string, port int, host, next string) (string, error) {
	for _, p := range f[key] {
		if p == port {
			return fmt.Sprintf("http://%s:9/enter?port=%d&next=%s", host, port, next), nil
		}
	}
	return "", fmt.Errorf("port %d: %w", port, web.ErrNoPreview)
}

// TestPreviewEntry: /s/{key}/port/{port}/… sends the signed-in operator,
// a bearer of the operator token and an admitted viewer to the forward's
// entry with the path asked for; the watch link alone gets 401, a tandem
// without an operator 403, and an unknown session or port 404.
func TestPreviewEntry(t *testing.T) {
	const key = "k1"
	mac := hmac.New(sha256.New, []byte(operatorToken))
	mac.Write([]byte("tandem admit\x00" + key))
	admit := base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	op := &web.Operator{Token: operatorToken, Approvals: newBroker(), Sessions: newDirectory()}
	terms := sessions{key: newFakeTerm("s1"), "k2": newFakeTerm("s2")}
	withOp := httptest.NewServer(web.New(terms, &web.Options{Logger: testLogger(t), Operator: op, Previews: fakePreviews{key: {3000}}}).Handler())
	t.Cleanup(withOp.Close)
	noOp := httptest.NewServer(web.New(terms, &web.Options{Logger: testLogger(t), Previews: fakePreviews{key: {3000}}}).Handler())
	t.Cleanup(noOp.Close)

	host := strings.Split(strings.TrimPrefix(withOp.URL, "http://"), ":")[0]
	for _, tc := range []struct {
		name, base, path string
		cookie, bearer   string
		code             int
		location         string
	}{
		{"watch link alone", withOp.URL, "/s/k1/port/3000/", "", "", http.StatusUnauthorized, ""},
		{"a wrong cookie", withOp.URL, "/s/k1/port/3000/", "tandem_operator=nope", "", http.StatusUnauthorized, ""},
		{"another session's admission", withOp.URL, "/s/k2/port/3000/", "tandem_admit=" + admit, "", http.StatusUnauthorized, ""},
		{"operator", withOp.URL, "/s/k1/port/3000/app/x%20y?q=1", "tandem_operator=" + operatorToken, "", http.StatusSeeOther,
			"http://" + host + ":9/enter?port=3000&next=/app/x%20y?q=1"},
		{"operator, no slash", withOp.URL, "/s/k1/port/3000", "tandem_operator=" + operatorToken, "", http.StatusSeeOther,
			"http://" + host + ":9/enter?port=3000&next=/"},
		{"bearer", withOp.URL, "/s/k1/port/3000/", "", operatorToken, http.StatusSeeOther, "http://" + host + ":9/enter?port=3000&next=/"},
		{"admitted viewer", withOp.URL, "/s/k1/port/3000/", "tandem_admit=" + admit, "", http.StatusSeeOther, "http://" + host + ":9/enter?port=3000&next=/"},
		{"port not forwarded", withOp.URL, "/s/k1/port/3001/", "tandem_operator=" + operatorToken, "", http.StatusNotFound, ""},
		{"not a port", withOp.URL, "/s/k1/port/03000/", "tandem_operator=" + operatorToken, "", http.StatusNotFound, ""},
		{"unknown session", withOp.URL, "/s/nope/port/3000/", "tandem_operator=" + operatorToken, "", http.StatusNotFound, ""},
		{"no operator", noOp.URL, "/s/k1/port/3000/", "", "", http.StatusForbidden, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", tc.base+tc.path, nil)
			if tc.cookie != "" {
				req.Header.Set("Cookie", tc.cookie)
			}
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			res, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.code || res.Header.Get("Location") != tc.location {
				t.Errorf("%d to %q, want %d to %q", res.StatusCode, res.Header.Get("Location"), tc.code, tc.location)
			}
		})
	}
}
