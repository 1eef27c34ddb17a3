package audit_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-sh/tandem/internal/audit"
	"github.com/tandem-sh/tandem/internal/store/sqlite"
)

// burstEnv switches the test binary into a child that appends to the
// audit log of the data dir it names, forever, from several goroutines,
// printing each seq once its record is committed: what a client would
// take as an acknowledged call.
const burstEnv = "TANDEM_AUDIT_TEST_BURST"

func TestMain(m *testing.M) {
	if dir, ok := os.LookupEnv(burstEnv); ok {
		os.Exit(burst(dir))
	}
	os.Exit(m.Run())
}

func burst(dir string) int {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := audit.New(st)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				rec, err := log.Append(ctx, audit.Record{
					Event: audit.EventToolCall, Actor: "burst", Tool: "ssh_exec",
					Args: []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i)),
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Println(rec.Seq) // unbuffered: one write(2) per acknowledged record
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

// TestAuditDurabilityKill9 kills a process appending in a burst with
// SIGKILL, three times on the same data dir. Each time the chain must
// verify, and every seq the child acknowledged must be in it.
func TestAuditDurabilityKill9(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var acked int64
	for round := range 3 {
		printed := killMidBurst(t, dir, 200+round*150)
		st := openStore(t, dir)
		n, err := audit.Verify(ctx, st)
		if err != nil {
			t.Fatalf("round %d: verify after kill -9: %v", round, err)
		}
		if printed > n {
			t.Fatalf("round %d: child acknowledged seq %d but the log holds %d records", round, printed, n)
		}
		t.Logf("round %d: acknowledged up to %d, chain intact with %d records", round, printed, n)
		if n <= acked {
			t.Fatalf("round %d: no progress (%d records, %d before)", round, n, acked)
		}
		acked = n
		_ = st.Close()
	}
}

// killMidBurst starts a burst child on dir, kills it with SIGKILL once it
// has acknowledged after records, and returns the highest seq it printed.
// Seqs are gap-free, so the log holding that seq means it holds them all.
func killMidBurst(t *testing.T, dir string, after int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burstEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		highest int64
		lines   int
	)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		seq, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		highest = max(highest, seq) // goroutines print in any order
		if lines++; lines == after {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL", err)
	}
	return highest
}
