package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// TestProxyHostsMapping: the operator's hosts mapping counts as listing
// its address for that name, so a listed (or approved) name mapped to a
// loopback address connects, while the same address from DNS is refused;
// a host whose address is known before asking and that no approval could
// let through (an unlisted loopback address, tandem's own port) is
// refused at once, nobody asked; and a human's denial carries its reason
// and who decided.
func TestProxyHostsMapping(t *testing.T) {
	echo := echoListener(t)
	port := echo.Addr().(*net.TCPAddr).Port
	own := netip.MustParseAddrPort("127.0.0.1:4001")
	var mu sync.Mutex
	var asked []string
	f := newFixture(t, []string{fmt.Sprintf("listed.test:%d", port), fmt.Sprintf("rebind.dns:%d", port)},
		map[string]string{"listed.test": "127.0.0.1", "asked.test": "127.0.0.1", "denied.test": "127.0.0.1", "own.test": "127.0.0.1", "rebind.dns": "127.0.0.1"},
		func(_ context.Context, host string, port uint16) (bool, error) {
			mu.Lock()
			asked = append(asked, host)
			mu.Unlock()
			if host == "denied.test" {
				return false, &Denial{Reason: "not on a Sunday", By: "dashboard"}
			}
			return true, nil
		}, own)
	tests := []struct {
		target, want string // want: "200", or what the 403 says
		asked        bool
	}{
		{fmt.Sprintf("listed.test:%d", port), "200", false},
		{fmt.Sprintf("asked.test:%d", port), "200", true},
		{fmt.Sprintf("rebind.dns:%d", port), "no address rule lists", false},
		{fmt.Sprintf("127.0.0.1:%d", port), "nobody was asked", false},
		{"own.test:4001", "nobody was asked", false},
		{fmt.Sprintf("denied.test:%d", port), "denied: not on a Sunday (decided by dashboard)", true},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			mu.Lock()
			asked = nil
			mu.Unlock()
			c, err := net.Dial("tcp", f.l.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tc.target, tc.target, auth(f.l))
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "200" {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("got %s, want a tunnel", resp.Status)
				}
			} else {
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), tc.want) {
					t.Fatalf("got %s %q, want 403 saying %q", resp.Status, body, tc.want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if (len(asked) > 0) != tc.asked {
				t.Errorf("asked %v, want asked %v", asked, tc.asked)
			}
		})
	}
	var sawDenial bool
	for _, c := range f.reports() {
		if c.Host == "denied.test" {
			sawDenial = c.Decision == Denied && c.DecidedBy == "dashboard" && strings.Contains(c.Reason, "not on a Sunday")
		}
		if c.Decision == Refused && c.DecidedBy != ByAllowlist {
			t.Errorf("a refusal not decided by the allowlist: %+v", c)
		}
	}
	if !sawDenial {
		t.Errorf("the denial's report: %+v", f.reports())
	}
}
