package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tandem-sh/tandem/internal/web"
)

// shelf is a ReplayShelf of fixed recordings by session id.
type shelf map[string]recorded

func (s shelf) Replay(_ context.Context, id string) (name, path string, ok bool) {
	r, ok := s[id]
	return r.name, r.path, ok
}

// TestOperatorReplayRoute: /replays/{id} and its cast are the signed-in
// operator's alone (cookie or bearer token); anyone else, and an unknown
// id, learns nothing. The dashboard links each ended session to it, and
// without Operator.Replays there is no such route and no link.
func TestOperatorReplayRoute(t *testing.T) {
	cast := writeCast(t)
	op := testOperator(newBroker(), newDirectory(liveRow, endedRow))
	op.Replays = shelf{endedRow.ID: {"old-box", cast}}
	base := startDashboard(t, op, sessions{})
	for _, tc := range []struct {
		name string
		rq   request
		want int
		has  string // the body holds it; "" for nothing of the session
	}{
		{"page", request{path: "/replays/s0"}, http.StatusOK, "old-box"},
		{"cast", request{path: "/replays/s0/cast"}, http.StatusOK, "exit"}, // with its input events
		{"cast by bearer", request{path: "/replays/s0/cast", cookie: "-", header: map[string]string{"Authorization": "Bearer " + operatorToken}}, http.StatusOK, "recorded output"},
		{"page without the cookie", request{path: "/replays/s0", cookie: "-"}, http.StatusUnauthorized, ""},
		{"cast without the cookie", request{path: "/replays/s0/cast", cookie: "-"}, http.StatusNotFound, ""},
		{"cast with a wrong cookie", request{path: "/replays/s0/cast", cookie: strings.Repeat("z", 43)}, http.StatusNotFound, ""},
		{"cast with a wrong bearer", request{path: "/replays/s0/cast", cookie: "-", header: map[string]string{"Authorization": "Bearer nope"}}, http.StatusNotFound, ""},
		{"unknown id", request{path: "/replays/s9/cast"}, http.StatusNotFound, ""},
		{"live session", request{path: "/replays/s1"}, http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw, _ := tc.rq.do(t, base)
			if status != tc.want {
				t.Fatalf("%s: %d, want %d", tc.rq.path, status, tc.want)
			}
			if tc.has != "" && !strings.Contains(raw, tc.has) {
				t.Errorf("%s: the body lacks %q", tc.rq.path, tc.has)
			}
			if tc.has == "" && (strings.Contains(raw, "old-box") || strings.Contains(raw, "recorded output")) {
				t.Errorf("%s: the body tells of the session", tc.rq.path)
			}
		})
	}
	_, _, st := request{path: "/api/state"}.do(t, base)
	replays := map[string]any{}
	for _, r := range st["sessions"].([]any) {
		row := r.(map[string]any)
		replays[row["id"].(string)] = row["replay"]
	}
	if replays["s0"] != "/replays/s0" || replays["s1"] != nil {
		t.Errorf("the dashboard's replay links: %v", replays)
	}

	// Without a shelf: no route, no link.
	base = startDashboard(t, testOperator(newBroker(), newDirectory(endedRow)), sessions{})
	if status, _, _ := (request{path: "/replays/s0/cast"}).do(t, base); status != http.StatusNotFound {
		t.Errorf("without Operator.Replays: %d, want 404", status)
	}
	if _, _, st := (request{path: "/api/state"}).do(t, base); st["sessions"].([]any)[0].(map[string]any)["replay"] != nil {
		t.Errorf("without Operator.Replays, a replay link: %v", st["sessions"])
	}
	var _ web.ReplayShelf = shelf{}
}
