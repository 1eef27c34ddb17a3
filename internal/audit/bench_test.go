package audit_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tandem-sh/tandem/internal/audit"
)

// BenchmarkAppend is sequential audited appends of a typical tool-call
// record (redaction, hashing, one BEGIN IMMEDIATE transaction each).
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	log := audit.New(openStore(b, b.TempDir()))
	exit := 0
	rec := audit.Record{
		Actor: "conn-1", SessionID: "s-1", SessionName: "dev", Target: "local", Tool: "ssh_exec",
		Event: audit.EventToolCall, Args: json.RawMessage(`{"sessionName":"dev","sessionToken":"abc","command":"true"}`),
		Outcome: audit.OutcomeOK, ExitCode: &exit, DurationMs: 1,
	}
	for b.Loop() {
		if _, err := log.Append(ctx, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkVerify100k verifies a chain of 100,000 records, built once.
func BenchmarkVerify100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	st := openStore(b, b.TempDir())
	fill(b, audit.New(st), n)
	for b.Loop() {
		got, err := audit.Verify(ctx, st)
		if err != nil || got != n {
			b.Fatalf("verify = %d, %v", got, err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/verify")
}
