package session

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/shell"
	"github.com/tandem-sh/tandem/internal/spool"
)

// finished files one finished command of out bytes of output, as the
// shell would: its stream spooled in dir, then kept.
func finished(s *Session, dir *spool.Dir, i int, out []byte) string {
	id := fmt.Sprintf("cmd_%08d", i)
	f := dir.New(id + ".out")
	_, _ = f.Write(out)
	_ = f.Close()
	s.keep(shell.Record{ID: id, Source: "user", Command: fmt.Sprintf("echo line %d", i), Stdout: f,
		ExitKnown: true, Started: time.Now(), Merged: true}, true)
	return id
}

// diskBytes is what the files under dir take.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestHistoryBoundByBytes: a session keeps its commands readable by ID
// within a bound on disk, not a count. A paste of 100,000 commands that
// print a line each stays readable whole under the default bound, with
// the memory it holds bounded (older records live in the index file, and
// outputs the journal has not written yet go to disk past 16 MiB);
// commands whose output passes a small bound push out the oldest, whose
// reads then say why; the disk never holds much more than the bound.
func TestHistoryBoundByBytes(t *testing.T) {
	tests := []struct {
		name     string
		n        int
		out      int   // bytes each command prints
		limit    int64 // the session's bound
		readable int   // the oldest command still readable
	}{
		{"100k one-line commands", 100_000, 12, DefaultKeptOutputBytes, 0},
		{"big outputs push out the oldest", 200, 256 << 10, 8 << 20, 200 - (8<<20)/(256<<10) + 1},
		{"more small commands than the bound holds", 5000, 100, 4 << 20, 5000 - (4<<20)/minCommandCost},
		{"commands printing 16 KiB each, before the journal writes them", 3000, 16 << 10, DefaultKeptOutputBytes, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := &spool.Dir{Path: filepath.Join(t.TempDir(), "spool"), Inline: spool.DefaultInline, MaxFile: tc.limit / 2}
			s := &Session{Name: "h", spool: dir, keptBytes: tc.limit}
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			ids := make([]string, tc.n)
			for i := range tc.n {
				out := bytes.Repeat([]byte{'a' + byte(i%26)}, tc.out)
				ids[i] = finished(s, dir, i, out)
			}
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			// What the records hold once done: well under a kilobyte each
			// beyond the latest in memory (the ids slice is the test's).
			if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > int64(tc.n)*400+int64(recentKept)*int64(tc.out+1024)+maxHeldMemory+(8<<20) {
				t.Errorf("the heap grew by %d bytes for %d commands", grew, tc.n)
			}
			if d := diskBytes(t, dir.Path); d > tc.limit+int64(tc.out) {
				t.Errorf("the spool holds %d bytes, over the bound of %d", d, tc.limit)
			}
			for _, i := range []int{tc.readable, (tc.readable + tc.n) / 2, tc.n - 1} {
				rec, done, ok := s.Command(ids[i])
				want := bytes.Repeat([]byte{'a' + byte(i%26)}, tc.out)
				if !ok || !done || !bytes.Equal(rec.Stdout.Bytes(), want) || rec.Command != fmt.Sprintf("echo line %d", i) {
					t.Fatalf("command %d: found %v done %v, %d bytes of output, command %q", i, ok, done, rec.Stdout.Size(), rec.Command)
				}
			}
			if tc.readable == 0 {
				return
			}
			gone := ids[tc.readable-2]
			if _, _, ok := s.Command(gone); ok {
				t.Fatalf("command %d is still kept, over the bound", tc.readable-2)
			}
			f, ok := s.Forgotten(gone)
			if !ok || f.Limit != tc.limit || f.Bytes < int64(tc.out) {
				t.Errorf("why command %d is gone: %+v %v", tc.readable-2, f, ok)
			}
			if _, err := os.Stat(filepath.Join(dir.Path, gone+".out")); !os.IsNotExist(err) {
				t.Errorf("its file is still there: %v", err)
			}
		})
	}
}

// TestHistoryKeepsUnreported: commands the gate has not reported yet are
// marked so when they go, and one stream stops at half the bound, so a
// program printing without end cannot fill the disk.
func TestHistoryKeepsUnreported(t *testing.T) {
	dir := &spool.Dir{Path: filepath.Join(t.TempDir(), "spool"), Inline: spool.DefaultInline, MaxFile: 1 << 20}
	s := &Session{Name: "h", spool: dir, keptBytes: 2 << 20}
	first := finished(s, dir, 0, bytes.Repeat([]byte("x"), 600<<10))
	s.userCommand(shell.Record{ID: first})
	flood := dir.New("cmd_flood.stdout")
	for range 64 {
		_, _ = flood.Write(bytes.Repeat([]byte("y"), 64<<10)) // 4 MiB
	}
	_ = flood.Close()
	if flood.Size() != 1<<20 || flood.Lost() != 3<<20 {
		t.Errorf("the flood kept %d bytes and lost %d; want 1 MiB and 3 MiB", flood.Size(), flood.Lost())
	}
	s.keep(shell.Record{ID: "cmd_flood", Source: "agent", Command: "yes", Stdout: flood, ExitKnown: true}, true)
	finished(s, dir, 1, bytes.Repeat([]byte("z"), 600<<10))
	if f, ok := s.Forgotten(first); !ok || !f.Unreported {
		t.Errorf("the unreported command that went first: %+v %v", f, ok)
	}
	if d := diskBytes(t, dir.Path); d > 2<<20 {
		t.Errorf("the spool holds %d bytes, over the 2 MiB bound", d)
	}
}

// rawBuf is a stream's exact copy kept in memory.
type rawBuf struct {
	bytes.Buffer
	kept bool
}

func (r *rawBuf) Close(keep bool) error { r.kept = keep; return nil }

// TestSealedCopyBounded: the exact copy of a redacted stream stops where
// the stream does, at the spool's per-stream bound.
func TestSealedCopyBounded(t *testing.T) {
	tests := []struct {
		name         string
		max          int64
		writes, want int
	}{
		{"no bound", 0, 100, 100 * 1000},
		{"under", 1 << 20, 100, 100 * 1000},
		{"past", 50_500, 100, 50_500},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf rawBuf
			sink := capRaw(&buf, tc.max)
			for range tc.writes {
				if n, err := sink.Write(make([]byte, 1000)); n != 1000 || err != nil {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			if err := sink.Close(true); err != nil || !buf.kept || buf.Len() != tc.want {
				t.Errorf("kept %d bytes (closed %v %v), want %d", buf.Len(), buf.kept, err, tc.want)
			}
		})
	}
}
