package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNetworkDenialReason: a host the operator mapped to loopback in
// hosts:, with no address entry, is asked about, and once a human approves
// it through the dashboard the connection goes through (the mapping counts
// as listing its address). When the human denies it with a reason, the
// reason and who decided reach the agent's reply (networkRefused), for
// HTTPS, where curl sees only the proxy's 403 to its CONNECT, as for
// plain HTTP.
func TestNetworkDenialReason(t *testing.T) {
	tlsPort, certFile := tlsServer(t, "asked.test")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "plain hello") }))
	t.Cleanup(plain.Close)
	plainPort := portOf(t, plain.Listener.Addr())
	ws := t.TempDir()
	ca, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := egressConfig(ws, map[string]string{
		"dev": `{allow: ["listed.example"], ask: true, hosts: {asked.test: 127.0.0.1}}`,
	}, "policy: {mode: allow, approvers: [dashboard]}\napprovals: {waitSeconds: 50, timeoutSeconds: 300}\n")
	srv := startServer(t, serverOpts{dir: ws, config: cfg})
	op := newOperatorClient(t, srv)
	s := connectTo(t, srv, "dev", "net")

	tests := []struct {
		name, url, target, reason string // reason "": approve
		stdout                    string
	}{
		{"https approved", "https://asked.test:" + strconv.Itoa(tlsPort) + "/", "asked.test:" + strconv.Itoa(tlsPort), "", "hello over tls"},
		{"https denied", "https://asked.test:" + strconv.Itoa(tlsPort) + "/", "asked.test:" + strconv.Itoa(tlsPort), "not during the release freeze", ""},
		{"http denied", "http://asked.test:" + strconv.Itoa(plainPort) + "/", "asked.test:" + strconv.Itoa(plainPort), "ask Dana first", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			replies := make(chan map[string]any, 1)
			go func() { replies <- s.exec(t, "curl -sS -f --max-time 60 --cacert ca.pem "+tc.url, 90) }()
			id := op.pendingID(t, "connect "+tc.target)
			// The approver sees where the operator's mapping leads.
			if st := op.do(t, http.MethodGet, "/api/state", ""); !strings.Contains(fmt.Sprint(st["pending"]), "maps asked.test to 127.0.0.1") {
				t.Errorf("the approval does not say where the hosts: mapping leads: %v", st["pending"])
			}
			op.do(t, http.MethodPost, "/api/approvals/"+id+"/decision", fmt.Sprintf(`{"approve":%v,"reason":%q}`, tc.reason == "", tc.reason))
			var r map[string]any
			select {
			case r = <-replies:
			case <-time.After(80 * time.Second):
				t.Fatal("the download did not end after the human decided")
			}
			res := result(t, r)
			refused, _ := res["networkRefused"].([]any)
			if tc.reason == "" {
				if str(res["stdout"]) != tc.stdout || len(refused) != 0 {
					t.Fatalf("approved: %v", r)
				}
				return
			}
			if res["exitCode"] == 0.0 || len(refused) != 1 {
				t.Fatalf("denied: %v", r)
			}
			got, _ := refused[0].(map[string]any)
			if want := tc.target; refusedTargets(res)[0] != want || !strings.Contains(str(got["reason"]), tc.reason) || got["decidedBy"] != "dashboard" {
				t.Errorf("networkRefused[0] = %v, want %s with the reason %q decided by dashboard", got, want, tc.reason)
			}
		})
	}
}
