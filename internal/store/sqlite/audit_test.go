package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

func TestStoreAuditRows(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)

	// The store enforces the sequence and rolls back a failed build.
	boom := errors.New("boom")
	if _, err := st.AppendAudit(ctx, func(store.AuditHead) (store.AuditRecord, error) { return store.AuditRecord{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("build error: %v", err)
	}
	if _, err := st.AppendAudit(ctx, func(h store.AuditHead) (store.AuditRecord, error) {
		return store.AuditRecord{Seq: h.Seq + 2, Time: t0, Event: "x"}, nil
	}); err == nil {
		t.Fatal("a record skipping a seq was stored")
	}
	if n, err := audit.Verify(ctx, st); n != 0 || err != nil {
		t.Fatalf("after failed appends: %d records, %v", n, err)
	}

	log := audit.New(st)
	exit := 3
	var appended []store.AuditRecord
	for i, name := range []string{"dev", "ops", "dev", "", "dev", "ops"} {
		rec, err := log.Append(ctx, store.AuditRecord{
			Time: t0.Add(time.Duration(i) * time.Second), Actor: "conn-1", SessionName: name, Tenant: []string{"a", "b"}[i%2], Tool: "ssh_exec",
			Event: audit.EventToolCall, Args: []byte(fmt.Sprintf(`{"command":"echo %d"}`, i)), Outcome: audit.OutcomeOK,
			ExitCode: &exit, DurationMs: int64(i), Bytes: 2,
		})
		mustNil(t, err)
		appended = append(appended, rec)
	}

	var scanned []store.AuditRecord
	mustNil(t, st.ScanAudit(ctx, func(r store.AuditRecord) error { scanned = append(scanned, r); return nil }))
	if len(scanned) != len(appended) {
		t.Fatalf("scanned %d records; want %d", len(scanned), len(appended))
	}
	for i := range scanned {
		if !sameRecord(scanned[i], appended[i]) {
			t.Errorf("record %d read back as\n%+v\nwant\n%+v", i+1, scanned[i], appended[i])
		}
	}

	for _, tc := range []struct {
		n               int
		session, tenant string
		want            []int64
	}{
		{2, "", "", []int64{5, 6}},
		{10, "dev", "", []int64{1, 3, 5}},
		{2, "dev", "", []int64{3, 5}},
		{10, "nope", "", nil},
		{0, "", "", nil},
		{10, "", "b", []int64{2, 4, 6}},
		{10, "ops", "b", []int64{2, 6}},
		{10, "dev", "b", nil},
	} {
		got, err := st.TailAudit(ctx, tc.n, store.AuditFilter{SessionName: tc.session, Tenant: tc.tenant})
		mustNil(t, err)
		if fmt.Sprint(seqs(got)) != fmt.Sprint(tc.want) {
			t.Errorf("TailAudit(%d, %q, %q) = %v; want %v", tc.n, tc.session, tc.tenant, seqs(got), tc.want)
		}
	}

	// tandem's own SQL cannot change history: the triggers refuse.
	db := rawDB(t, dir)
	for _, q := range []string{`UPDATE audit SET outcome = 'x' WHERE seq = 2`, `DELETE FROM audit WHERE seq = 6`} {
		if _, err := db.Exec(q); err == nil {
			t.Errorf("%s: succeeded on an append-only table", q)
		}
	}
}

// sameRecord compares records, times by instant.
func sameRecord(a, b store.AuditRecord) bool {
	if !a.Time.Equal(b.Time) {
		return false
	}
	a.Time, b.Time = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func seqs(rs []store.AuditRecord) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

// TestStoreAuditTwoHandles appends from many goroutines through two
// handles on one data dir, each with its own connections and its own
// in-process writer queue, so they contend only through SQLite's file
// locks, as two processes do.
func TestStoreAuditTwoHandles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	logs := []*audit.Log{audit.New(openStore(t, dir)), audit.New(openStore(t, dir))}
	const goroutines, each = 8, 40
	errs := make(chan error, len(logs)*goroutines)
	for h, log := range logs {
		for g := range goroutines {
			go func() {
				for i := range each {
					if _, err := log.Append(ctx, store.AuditRecord{
						Event: audit.EventToolCall, Actor: fmt.Sprintf("h%d-g%d", h, g), Tool: "ssh_exec",
						Args: []byte(fmt.Sprintf(`{"i":%d}`, i)),
					}); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for range len(logs) * goroutines {
		mustNil(t, <-errs)
	}
	checkAppendedOnce(t, openStore(t, dir), len(logs)*goroutines*each, func(r store.AuditRecord) string {
		return r.Actor + string(r.Args)
	})
}

// checkAppendedOnce verifies the chain holds want records, in seq order
// with no gaps, each with a distinct key.
func checkAppendedOnce(t *testing.T, st *sqlite.DB, want int, key func(store.AuditRecord) string) {
	t.Helper()
	ctx := context.Background()
	n, err := audit.Verify(ctx, st)
	if err != nil || n != int64(want) {
		t.Fatalf("verify: %d records, %v; want %d intact", n, err, want)
	}
	seen := map[string]bool{}
	var next int64 = 1
	mustNil(t, st.ScanAudit(ctx, func(r store.AuditRecord) error {
		if r.Seq != next {
			return fmt.Errorf("seq %d where %d was expected", r.Seq, next)
		}
		next++
		if k := key(r); seen[k] {
			return fmt.Errorf("record %q stored twice", k)
		} else {
			seen[k] = true
		}
		return nil
	}))
}

// TestStoreWriteWaitsForLock holds the write lock from another connection,
// as another process mid-transaction would: a write waits for it, and a
// write whose ctx ends stops waiting at once rather than after 10 s.
func TestStoreWriteWaitsForLock(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	log := audit.New(openStore(t, dir))
	conn, err := rawDB(t, dir).Conn(ctx)
	mustNil(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
	mustNil(t, err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = log.Append(short, store.AuditRecord{Event: audit.EventToolCall})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("append under a held lock with a 200ms ctx: %v after %v", err, time.Since(start))
	}

	time.AfterFunc(300*time.Millisecond, func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
	})
	start = time.Now()
	rec, err := log.Append(ctx, store.AuditRecord{Event: audit.EventToolCall})
	if err != nil || rec.Seq != 1 || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("append after the lock is released: %+v, %v after %v", rec, err, time.Since(start))
	}
}
