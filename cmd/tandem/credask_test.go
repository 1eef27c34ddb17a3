package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInspectedRequestAsk: with ask: true, a request on an inspected
// connection that the entry's methods or paths refuse waits for a human,
// as an approval that reads "POST api.test:PORT/repos/acme/x". Approved
// on the dashboard, it goes through with the credential; denied, the
// human's reason and who decided reach networkRefused with the method
// and path, and the server sees nothing.
func TestInspectedRequestAsk(t *testing.T) {
	var tb [20]byte
	if _, err := rand.Read(tb[:]); err != nil {
		t.Fatal(err)
	}
	token := "tok_" + hex.EncodeToString(tb[:])
	api := newAPIServer(t, token)
	tokenFile := filepath.Join(t.TempDir(), "api.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	port := strconv.Itoa(api.port)
	cfg := egressConfig(ws, map[string]string{
		"dev": fmt.Sprintf(`{allow: [{host: "api.test:%s", methods: [GET]}], ask: true, hosts: {api.test: 127.0.0.1},`+
			` credentials: [{name: api, host: api.test, value: "Bearer {secret}", secretFile: %s, caFile: %s}]}`, port, tokenFile, api.certFile),
	}, "policy: {mode: allow, approvers: [dashboard]}\napprovals: {waitSeconds: 50, timeoutSeconds: 300}\n")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	op := newOperatorClient(t, srv)
	s := connectTo(t, srv, "dev", "ask")
	tests := []struct {
		name, path, reason string // reason "": approve
	}{
		{"approved", "/repos/acme/x", ""},
		{"denied", "/repos/acme/y", "no writes today"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(api.requests())
			replies := make(chan map[string]any, 1)
			go func() {
				replies <- s.exec(t, "curl -sS -f --max-time 60 -X POST https://api.test:"+port+tc.path, 90)
			}()
			id := op.pendingID(t, "POST api.test:"+port+tc.path)
			op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", fmt.Sprintf(`{"approve":%v,"reason":%q}`, tc.reason == "", tc.reason))
			var r map[string]any
			select {
			case r = <-replies:
			case <-time.After(80 * time.Second):
				t.Fatal("the request did not end after the human decided")
			}
			res := result(t, r)
			seen := api.requests()[before:]
			if tc.reason == "" {
				if res["exitCode"] != 0.0 || !strings.Contains(str(res["stdout"]), "hello "+tc.path) || len(seen) != 1 || !strings.Contains(seen[0], "POST "+tc.path+" Bearer "+token) {
					t.Fatalf("approved: %v; the server saw %q", r, seen)
				}
				return
			}
			refused, _ := res["networkRefused"].([]any)
			if res["exitCode"] == 0.0 || len(refused) != 1 || len(seen) != 0 {
				t.Fatalf("denied: %v; the server saw %q", r, seen)
			}
			got, _ := refused[0].(map[string]any)
			if !strings.Contains(str(got["reason"]), tc.reason) || got["decidedBy"] != "dashboard" || got["method"] != "POST" || got["path"] != tc.path {
				t.Errorf("networkRefused[0] = %v, want POST %s denied by dashboard saying %q", got, tc.path, tc.reason)
			}
		})
	}
}
