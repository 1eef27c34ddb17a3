package audit_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

func openStore(t testing.TB, dir string) *sqlite.DB {
	t.Helper()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// fill appends n tool-call records, each with distinct arguments.
func fill(t testing.TB, log *audit.Log, n int) {
	t.Helper()
	exit := 0
	for i := range n {
		if _, err := log.Append(context.Background(), audit.Record{
			Actor: "conn-1", SessionID: "s-1", SessionName: "dev", Target: "local", Tool: "ssh_exec",
			Event: audit.EventToolCall, Args: json.RawMessage(fmt.Sprintf(`{"command":"echo %d"}`, i)),
			Outcome: audit.OutcomeOK, ExitCode: &exit, DurationMs: 3, Bytes: 2,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditAppendLinks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	log := audit.New(st)
	before := time.Now()
	first, err := log.Append(ctx, audit.Record{Event: audit.EventServerRestart, Args: json.RawMessage(`{"password":"hunter2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := log.Append(ctx, audit.Record{Event: audit.EventSessionStart, Seq: 99, PrevHash: "forged", Hash: "forged"})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case first.Seq != 1 || first.PrevHash != audit.GenesisHash || first.Hash != audit.Hash(first):
		t.Fatalf("first = %+v", first)
	case second.Seq != 2 || second.PrevHash != first.Hash || second.Hash != audit.Hash(second):
		t.Fatalf("second = %+v; caller-set chain fields must be ignored", second)
	case first.Time.Before(before) || first.Time.Location() != time.UTC:
		t.Fatalf("zero time became %v; want now, in UTC", first.Time)
	case string(first.Args) != `{"password":"[redacted]"}`:
		t.Fatalf("args stored as %s; Append must redact", first.Args)
	}
	if _, err := log.Append(ctx, audit.Record{}); err == nil {
		t.Fatal("a record without an event was appended")
	}
	if n, err := audit.Verify(ctx, st); n != 2 || err != nil {
		t.Fatalf("verify = %d, %v", n, err)
	}
}

// TestAuditHashCoversEveryField changes each field in turn: every one but
// Hash must change the hash.
func TestAuditHashCoversEveryField(t *testing.T) {
	exit := 1
	base := audit.Record{
		Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Tenant: "t", Actor: "a", ClaimFingerprint: "c",
		JTI: "j", SessionID: "si", SessionName: "sn", Target: "ta", Tool: "to", Event: "e", Args: json.RawMessage(`{}`),
		Outcome: "o", Reason: "r", ExitCode: &exit, DurationMs: 8, Bytes: 9, ApprovalID: "ap",
		PrevHash: audit.GenesisHash, Hash: "h", HashVersion: 1,
	}
	// A fixed record hashes to a fixed value: the encoding is a format.
	// The golden value was computed by a separate implementation written
	// from the package doc alone, so the doc and the code agree. Records
	// written before version 2 must keep verifying.
	if got, golden := audit.Hash(base), "457ac60ed64085b83f3ba1ec01aeef24ba0e18dcb2343576480b5e60b1056c7f"; got != golden {
		t.Errorf("hash of the reference record = %s; the v1 encoding changed (golden %s)", got, golden)
	}
	base.HashVersion, base.SID, base.Workspace = 2, "sid", "ws"
	want := audit.Hash(base)
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		r := base
		f := reflect.ValueOf(&r).Elem().Field(i)
		switch x := f.Addr().Interface().(type) {
		case *string:
			*x += "x"
		case *int64:
			*x++
		case *time.Time:
			*x = x.Add(time.Nanosecond)
		case *json.RawMessage:
			*x = json.RawMessage(`{ }`)
		case **int:
			*x = nil
		case *int: // HashVersion: another version hashes differently
			*x = 1
		default:
			t.Fatalf("field %s: type %T not covered by this test", name, x)
		}
		if got := audit.Hash(r); (got != want) != (name != "Hash") {
			t.Errorf("changing %s: hash changed = %v", name, got != want)
		}
	}
	// Adjacent fields cannot trade bytes.
	a, b := base, base
	a.Tenant, a.Actor = "ab", "c"
	b.Tenant, b.Actor = "a", "bc"
	if audit.Hash(a) == audit.Hash(b) {
		t.Error("moving a byte between fields kept the hash")
	}
}

// tamper edits the database file the way an intruder would: directly,
// after dropping the triggers that stop tandem's own code.
func tamper(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range append([]string{`DROP TRIGGER audit_no_update`, `DROP TRIGGER audit_no_delete`}, stmts...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestAuditTamper(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		edit   []string
		seq    int64
		reason string
	}{
		{"edit args", []string{`UPDATE audit SET args = '{"command":"echo harmless"}' WHERE seq = 17`}, 17, "hash mismatch (record altered)"},
		{"edit args whitespace", []string{`UPDATE audit SET args = '{"command": "echo 16"}' WHERE seq = 17`}, 17, "hash mismatch"},
		{"edit exit code", []string{`UPDATE audit SET exit_code = NULL WHERE seq = 5`}, 5, "hash mismatch"},
		{"edit hash", []string{`UPDATE audit SET hash = '` + strings.Repeat("a", 64) + `' WHERE seq = 17`}, 17, "hash mismatch"},
		{"edit time spelling", []string{`UPDATE audit SET time = substr(time, 1, 19) || 'Z' WHERE seq = 9`}, 9, "unreadable"},
		{"delete record", []string{`DELETE FROM audit WHERE seq = 17`}, 17, "missing: seq gap after 16 (next record is 18)"},
		{"delete first", []string{`DELETE FROM audit WHERE seq = 1`}, 1, "missing: the log starts at record 2"},
		{"edit prev_hash", []string{`UPDATE audit SET prev_hash = '` + audit.GenesisHash + `' WHERE seq = 18`}, 18, "prev_hash does not match record 17"},
		{"edit first prev_hash", []string{`UPDATE audit SET prev_hash = hash WHERE seq = 1`}, 1, "prev_hash is not the genesis hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st := openStore(t, dir)
			fill(t, audit.New(st), 30)
			if n, err := audit.Verify(ctx, st); n != 30 || err != nil {
				t.Fatalf("before tampering: %d, %v", n, err)
			}
			tamper(t, dir, tc.edit...)
			n, err := audit.Verify(ctx, st)
			var be *audit.BrokenError
			if !errors.As(err, &be) || be.Seq != tc.seq || !strings.Contains(be.Reason, tc.reason) {
				t.Fatalf("verify = %v; want record %d: %s", err, tc.seq, tc.reason)
			}
			if n != tc.seq-1 {
				t.Errorf("intact records = %d; want %d", n, tc.seq-1)
			}
		})
	}
}

// TestAuditRehashedEditIsCaughtNext: an intruder who edits a record and
// recomputes its hash breaks the link of the record after it.
func TestAuditRehashedEditIsCaughtNext(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	fill(t, audit.New(st), 30)
	recs, err := st.TailAudit(ctx, 14, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0] // seq 17
	r.Args = json.RawMessage(`{"command":"echo harmless"}`)
	tamper(t, dir, fmt.Sprintf(`UPDATE audit SET args = '%s', hash = '%s' WHERE seq = %d`, r.Args, audit.Hash(r), r.Seq))
	_, err = audit.Verify(ctx, st)
	var be *audit.BrokenError
	if !errors.As(err, &be) || be.Seq != 18 {
		t.Fatalf("verify = %v; want record 18", err)
	}
	t.Log(err)
}
