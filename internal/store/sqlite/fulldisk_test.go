package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// TestStoreAuditFullDisk fills the database up (SQLite's max_page_count, the
// same SQLITE_FULL a full disk gives) in the middle of appending: Append
// must report the SQLite error, wrapped with what failed, and leave the
// chain valid with every acknowledged record; once there is room again,
// appending resumes on the same chain.
func TestStoreAuditFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	log := audit.New(st)
	rec := func(i int) store.AuditRecord {
		return store.AuditRecord{Event: audit.EventToolCall, Args: []byte(fmt.Sprintf(`{"command":%q}`, strings.Repeat("x", 200)+strconv.Itoa(i)))}
	}
	for i := range 10 {
		_, err := log.Append(ctx, rec(i))
		mustNil(t, err)
	}
	lift, err := sqlite.LimitPages(ctx, st, 3)
	mustNil(t, err)

	acked := 10
	for ; acked < 10_000; acked++ {
		if _, err = log.Append(ctx, rec(acked)); err != nil {
			break
		}
	}
	var se *modernc.Error
	if err == nil || !errors.As(err, &se) || se.Code() != sqlite3.SQLITE_FULL || !strings.Contains(err.Error(), "audit append tool_call") {
		t.Fatalf("append on a full database: %v; want a wrapped SQLITE_FULL", err)
	}
	t.Logf("after %d records: %v", acked, err)
	if n, err := audit.Verify(ctx, st); err != nil || n != int64(acked) {
		t.Fatalf("verify after full: %d, %v; want %d intact", n, err, acked)
	}

	mustNil(t, lift())
	for i := range 5 {
		_, err := log.Append(ctx, rec(acked+i))
		mustNil(t, err)
	}
	if n, err := audit.Verify(ctx, st); err != nil || n != int64(acked+5) {
		t.Fatalf("verify after room again: %d, %v; want %d", n, err, acked+5)
	}
}

// TestStoreAuditFileSizeLimit makes the operating system refuse the write:
// a child process appends under RLIMIT_FSIZE (with SIGXFSZ ignored, the
// write fails with EFBIG, as on a full disk) until an append fails. Every
// record the child acknowledged must be in a valid chain afterwards.
func TestStoreAuditFileSizeLimit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	openStore(t, dir).Close()

	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=fsize %s %d", childEnv, dir, 512<<10))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var last int64
	var failure string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if msg, ok := strings.CutPrefix(sc.Text(), "error: "); ok {
			failure = msg
			continue
		}
		last, err = strconv.ParseInt(sc.Text(), 10, 64)
		mustNil(t, err)
	}
	if failure == "" || last == 0 {
		t.Fatalf("child never hit the limit; output:\n%s", out)
	}
	t.Logf("child acknowledged %d records, then: %s", last, failure)

	st := openStore(t, dir)
	if n, err := audit.Verify(ctx, st); err != nil || n != last {
		t.Fatalf("verify: %d, %v; want %d intact", n, err, last)
	}
	if _, err := audit.New(st).Append(ctx, store.AuditRecord{Event: audit.EventServerRestart}); err != nil {
		t.Fatal(err)
	}
	if n, err := audit.Verify(ctx, st); err != nil || n != last+1 {
		t.Fatalf("verify after resuming: %d, %v", n, err)
	}
}

// fileSizeChild limits this process's files to limit bytes and appends
// until an append fails, printing each acknowledged seq, then the error.
func fileSizeChild(ctx context.Context, st *sqlite.DB, limit int) error {
	signal.Ignore(syscall.SIGXFSZ)
	lim := syscall.Rlimit{Cur: uint64(limit), Max: uint64(limit)}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return fmt.Errorf("setrlimit: %w", err)
	}
	log := audit.New(st)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := range 1_000_000 {
		rec, err := log.Append(ctx, store.AuditRecord{Event: audit.EventToolCall, Args: []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("p", 300)))})
		if err != nil {
			fmt.Fprintln(w, "error:", err)
			return nil
		}
		fmt.Fprintln(w, rec.Seq)
	}
	return errors.New("the file size limit was never hit")
}
