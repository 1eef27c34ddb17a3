// Package metrics is tandem's Prometheus instrumentation: what an operator
// watches to know the service is healthy. One Metrics per server, on its
// own registry (no global state); the layers that do the work report to
// it through small hooks, and /metrics serves it in the text format.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the service's instruments.
type Metrics struct {
	reg *prometheus.Registry

	toolCalls     *prometheus.CounterVec
	toolLatency   *prometheus.HistogramVec
	gateTrips     prometheus.Counter
	sessionsEnded *prometheus.CounterVec
	decided       *prometheus.CounterVec
	auditAppend   prometheus.Histogram
	storeErrors   prometheus.Counter
	forwarded     *prometheus.CounterVec
	forwardTime   *prometheus.HistogramVec
}

// Gauges are read when Prometheus scrapes: the live counts.
type Gauges struct {
	// ActiveSessions is how many sessions have a live shell.
	ActiveSessions func() int
	// PendingApprovals is how many approvals wait for an answer.
	PendingApprovals func() int
}

// New registers every instrument on a fresh registry.
func New(g Gauges) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_tool_calls_total",
		Help: "MCP tool calls, by tool and outcome (ok, or the error code)."}, []string{"tool", "outcome"})
	m.toolLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tandem_tool_call_duration_seconds",
		Help:    "How long MCP tool calls took, audit included, by tool.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"tool"})
	m.gateTrips = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_gate_trips_total",
		Help: "Agent calls refused once with user_activity_detected because the human ran commands."})
	m.sessionsEnded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_sessions_ended_total",
		Help: "Sessions that ended, by reason."}, []string{"reason"})
	m.decided = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_approvals_decided_total",
		Help: "Approvals answered, by status (approved, denied, expired) and who decided."}, []string{"status", "by"})
	m.auditAppend = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_audit_append_duration_seconds",
		Help:    "How long committing one audit record took.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}})
	m.storeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_store_errors_total",
		Help: "Failed writes to the store (audit records that could not be committed)."})
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_forwarded_requests_total",
		Help: "Requests this node sent to the node holding their session, by kind (mcp, monitor, internal) and outcome (ok, unreachable)."},
		[]string{"kind", "outcome"})
	m.forwardTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tandem_forwarded_request_duration_seconds",
		Help:    "How long forwarded requests took, the owner's work included, by kind.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"kind"})
	m.reg.MustRegister(m.toolCalls, m.toolLatency, m.gateTrips, m.sessionsEnded, m.decided, m.auditAppend, m.storeErrors,
		m.forwarded, m.forwardTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if g.ActiveSessions != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_sessions", Help: "Sessions by state.",
			ConstLabels: prometheus.Labels{"state": "active"}}, func() float64 { return float64(g.ActiveSessions()) }))
	}
	if g.PendingApprovals != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_approvals_pending",
			Help: "Approvals waiting for an answer."}, func() float64 { return float64(g.PendingApprovals()) }))
	}
	return m
}

// Handler serves the registry in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// ToolCall counts one MCP tool call.
func (m *Metrics) ToolCall(tool, outcome string, took time.Duration) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolLatency.WithLabelValues(tool).Observe(took.Seconds())
	if outcome == "user_activity_detected" {
		m.gateTrips.Inc()
	}
}

// AuditAppend times one audit commit; err counts a store error.
func (m *Metrics) AuditAppend(took time.Duration, err error) {
	m.auditAppend.Observe(took.Seconds())
	if err != nil {
		m.storeErrors.Inc()
	}
}

// SessionEnded counts a session's end.
func (m *Metrics) SessionEnded(reason string) { m.sessionsEnded.WithLabelValues(reason).Inc() }

// ApprovalDecided counts an answered approval.
func (m *Metrics) ApprovalDecided(status, by string) { m.decided.WithLabelValues(status, by).Inc() }

// Forwarded counts one request sent to the node holding its session.
func (m *Metrics) Forwarded(kind, outcome string, took time.Duration) {
	m.forwarded.WithLabelValues(kind, outcome).Inc()
	m.forwardTime.WithLabelValues(kind).Observe(took.Seconds())
}

// StoreError counts a failed store operation outside the audit path.
func (m *Metrics) StoreError() { m.storeErrors.Inc() }
