package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches /metrics and parses it with Prometheus's own parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// value is the metric of fam whose labels include want (0 if none).
func value(fams map[string]*dto.MetricFamily, fam string, want map[string]string) float64 {
	f := fams[fam]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

// TestOperations: /healthz, /readyz, and /metrics in Prometheus's text
// format, moving as calls are made; logs as JSON on request.
func TestOperations(t *testing.T) {
	srv := startServer(t, serverOpts{config: askConfig(t.TempDir()), args: []string{"--log-format", "json"}})
	base := newOperatorClient(t, srv).base
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s %s", path, resp.Status, b)
		}
	}
	before := scrape(t, base)
	tok := str(mustOK(t, srv.call(t, "ssh_connect", map[string]any{"name": "m"}))["sessionToken"])
	wantError(t, sess{srv, "m", tok}.exec(t, "echo counted"), "approval_pending")
	after := scrape(t, base)
	for _, tc := range []struct {
		fam    string
		labels map[string]string
		delta  float64
	}{
		{"tandem_tool_calls_total", map[string]string{"tool": "ssh_connect", "outcome": "ok"}, 1},
		{"tandem_tool_calls_total", map[string]string{"tool": "ssh_exec", "outcome": "approval_pending"}, 1},
		{"tandem_tool_call_duration_seconds", map[string]string{"tool": "ssh_exec"}, 1},
		{"tandem_sessions", map[string]string{"state": "active"}, 1},
		{"tandem_approvals_pending", nil, 1},
		{"tandem_audit_append_duration_seconds", nil, 2}, // the two calls' records
	} {
		if d := value(after, tc.fam, tc.labels) - value(before, tc.fam, tc.labels); d < tc.delta {
			t.Errorf("%s%v moved by %v, want at least %v", tc.fam, tc.labels, d, tc.delta)
		}
	}
	// Every log line is one JSON object.
	for _, line := range strings.Split(strings.TrimSpace(srv.log()), "\n") {
		if strings.HasPrefix(line, "tandem: ") {
			continue // the lines for the person at the terminal
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] == nil {
			t.Errorf("not a JSON log line: %q", line)
		}
	}
}
